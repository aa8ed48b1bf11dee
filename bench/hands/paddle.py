"""The hand loop in PaddlePaddle: ``paddle.io.DataLoader`` over a map-style dataset."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
from paddle.io import DataLoader, Dataset

from bench.hands import BATCH_SIZE, LR, SIZES, make_data

NAME = "paddle"
TRAINER_KWARGS = {"driver": "paddle", "device": "cpu"}


def version() -> str:
    return paddle.__version__


def configure(threads: int) -> None:
    paddle.set_device("cpu")  # threads: OMP_NUM_THREADS, set by the bench before the import


class MLP(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        layers: list[paddle.nn.Layer] = []
        for i, (n_in, n_out) in enumerate(zip(SIZES, SIZES[1:])):
            if i:
                layers.append(paddle.nn.ReLU())
            layers.append(paddle.nn.Linear(n_in, n_out))
        self.layers = paddle.nn.Sequential(*layers)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.layers(x)

    def train_step(self, x: paddle.Tensor, y: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"loss": paddle.nn.functional.cross_entropy(self(x), y)}


class DictDataset(Dataset):
    """Rows of pre-generated arrays as ``{"x": ..., "y": ...}`` numpy samples (paddle collates)."""

    def __init__(self, x: Any, y: Any) -> None:
        super().__init__()
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {"x": self.x[index], "y": self.y[index]}


def build_task(batches: int, seed: int = 0):
    dataset = DictDataset(*make_data(batches, seed))

    def loader() -> DataLoader:
        return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False)

    def model_and_optimizer():
        paddle.seed(seed)  # every contender starts from the same weights
        model = MLP()
        return model, paddle.optimizer.SGD(learning_rate=LR, parameters=model.parameters())
    return loader, model_and_optimizer


def hand_epoch(loader, model, optimizer) -> Callable[[], None]:
    cross_entropy = paddle.nn.functional.cross_entropy

    def epoch() -> None:
        model.train()
        for batch in loader:
            loss = cross_entropy(model(batch["x"]), batch["y"])
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
    return epoch


def finish() -> None:
    """Eager and synchronous on CPU: nothing is queued."""


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
