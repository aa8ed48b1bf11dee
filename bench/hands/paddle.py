"""The hand loop in PaddlePaddle: ``paddle.io.DataLoader`` over a map-style dataset."""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle.io import DataLoader, Dataset

from bench.hands import BATCH_SIZE, LR, SIZES, make_data
from bench.hands.workloads import LOADER_SIZES, Workload

NAME = "paddle"
TRAINER_KWARGS = {"driver": "paddle", "device": "cpu"}
LOSSES = {"cross_entropy": F.cross_entropy, "nll": F.nll_loss}


def version() -> str:
    return paddle.__version__


def configure(threads: int) -> None:
    paddle.set_device("cpu")  # threads: OMP_NUM_THREADS, set by the bench before the import


def seed(value: int) -> None:
    """The framework's global random seed (initial weights, dropout)."""
    paddle.seed(value)


class MLP(paddle.nn.Layer):
    def __init__(self, sizes: tuple[int, ...] = SIZES) -> None:
        super().__init__()
        layers: list[paddle.nn.Layer] = []
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            if i:
                layers.append(paddle.nn.ReLU())
            layers.append(paddle.nn.Linear(n_in, n_out))
        self.layers = paddle.nn.Sequential(*layers)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.layers(x)

    def train_step(self, x: paddle.Tensor, y: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"loss": F.cross_entropy(self(x), y)}


class CNN(paddle.nn.Layer):
    """pytorch/examples' MNIST net (Accelerate's tutorial's BasicNet): log-probabilities out."""

    def __init__(self, dropout: bool = True) -> None:
        super().__init__()
        self.conv1, self.conv2 = paddle.nn.Conv2D(1, 32, 3, 1), paddle.nn.Conv2D(32, 64, 3, 1)
        self.dropout1 = paddle.nn.Dropout(0.25 if dropout else 0.0)
        self.dropout2 = paddle.nn.Dropout(0.5 if dropout else 0.0)
        self.fc1, self.fc2 = paddle.nn.Linear(9216, 128), paddle.nn.Linear(128, 10)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = F.relu(self.fc1(paddle.flatten(self.dropout1(x), 1)))
        return F.log_softmax(self.fc2(self.dropout2(x)), axis=1)

    def train_step(self, x: paddle.Tensor, y: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"loss": F.nll_loss(self(x), y)}


class DictDataset(Dataset):
    """Rows of named columns as ``{name: value}`` numpy samples (paddle collates); with
    ``transform(sample, index)`` applied (numpy work in ``__getitem__``) when given."""

    def __init__(self, columns: dict[str, np.ndarray], transform: Optional[Callable] = None) -> None:
        super().__init__()
        self.columns, self.transform = columns, transform
        self.length = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Any]:
        sample = {name: column[index] for name, column in self.columns.items()}
        return self.transform(sample, index) if self.transform else sample


def make_loader(columns: dict[str, np.ndarray], batch_size: int, workers: int = 0,
                transform: Optional[Callable] = None) -> Callable[[], DataLoader]:
    """A factory of fresh loaders of this framework's own kind over the same samples, in order."""
    dataset = DictDataset(columns, transform)
    return lambda: DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=workers)


def build_model(workload: Workload, seed_value: int, dropout: bool = True) -> paddle.nn.Layer:
    """The workload's model, the same initial weights for the same seed."""
    if workload.name == "transformer":
        from examples.text_classification.models.paddle import build_classifier
        return build_classifier(seed=seed_value)  # numpy initial weights, the same on every framework
    seed(seed_value)
    return CNN(dropout) if workload.name == "cnn" else MLP(LOADER_SIZES)


def make_optimizer(kind: str, model: paddle.nn.Layer, lr: float) -> paddle.optimizer.Optimizer:
    return (paddle.optimizer.Adam if kind == "adam" else paddle.optimizer.SGD)(
        learning_rate=lr, parameters=model.parameters())


def build_task(batches: int, seed_value: int = 0):
    x, y = make_data(batches, seed_value)
    loader = make_loader({"x": x, "y": y}, BATCH_SIZE)

    def model_and_optimizer():
        seed(seed_value)  # every contender starts from the same weights
        model = MLP()
        return model, paddle.optimizer.SGD(learning_rate=LR, parameters=model.parameters())
    return loader, model_and_optimizer


def hand_epoch(loader, model, optimizer, loss: str = "cross_entropy", keys: tuple[str, str] = ("x", "y")
               ) -> Callable[[], None]:
    loss_fn, (inputs, target) = LOSSES[loss], keys

    def epoch() -> None:
        model.train()
        for batch in loader:
            value = loss_fn(model(batch[inputs]), batch[target])
            value.backward()
            optimizer.step()
            optimizer.clear_grad()
    return epoch


def loader_workers(loader: Any) -> int:
    """Worker processes the loader runs."""
    return loader.num_workers


def finish() -> None:
    """Eager and synchronous on CPU: nothing is queued."""


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
