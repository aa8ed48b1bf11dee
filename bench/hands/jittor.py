"""The hand loop in Jittor: a ``jittor.dataset.Dataset`` is its own loader (``set_attrs``)."""
from __future__ import annotations

from typing import Any, Callable

import jittor as jt
import numpy as np
from jittor.dataset import Dataset

from bench.hands import BATCH_SIZE, LR, SIZES, make_data

NAME = "jittor"
TRAINER_KWARGS = {"driver": "jittor", "device": "cpu"}


# Jittor runs its graph lazily and fuses what is queued when a value is read: a loop that reads the
# loss (a progress bar showing it) rounds differently (~1e-8) from one that never does, hand-written or not.
ROUNDING_NOTE = "jittor fuses its lazy graph where a value is read: a bar showing the loss rounds differently"


def version() -> str:
    return jt.__version__


def configure(threads: int) -> None:
    jt.flags.use_cuda = 0  # threads: OMP_NUM_THREADS, set by the bench before the import


class MLP(jt.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[jt.Module] = []
        for i, (n_in, n_out) in enumerate(zip(SIZES, SIZES[1:])):
            if i:
                layers.append(jt.nn.ReLU())
            layers.append(jt.nn.Linear(n_in, n_out))
        self.layers = jt.nn.Sequential(*layers)

    def execute(self, x: jt.Var) -> jt.Var:
        return self.layers(x)

    def train_step(self, x: jt.Var, y: jt.Var) -> dict[str, jt.Var]:
        return {"loss": jt.nn.cross_entropy_loss(self(x), y)}


class DictDataset(Dataset):
    """Rows of pre-generated arrays as ``{"x": ..., "y": ...}`` samples; jittor batches them."""

    def __init__(self, x: Any, y: Any) -> None:
        super().__init__()
        self.x, self.y = x, y
        self.set_attrs(total_len=len(x), batch_size=BATCH_SIZE, shuffle=False)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {"x": self.x[index], "y": self.y[index]}


def build_task(batches: int, seed: int = 0):
    x, y = make_data(batches, seed)

    def loader() -> DictDataset:
        return DictDataset(x, y)

    def model_and_optimizer():
        jt.sync_all()
        jt.set_seed(seed)  # every contender starts from the same weights
        model = MLP()
        return model, jt.optim.SGD(model.parameters(), lr=LR)
    return loader, model_and_optimizer


def hand_epoch(loader, model, optimizer) -> Callable[[], None]:
    cross_entropy = jt.nn.cross_entropy_loss

    def epoch() -> None:
        model.train()
        for batch in loader:
            loss = cross_entropy(model(batch["x"]), batch["y"])
            optimizer.step(loss)  # jittor's idiom: backward, update and zero the gradients
    return epoch


def finish() -> None:
    jt.sync_all(True)  # jittor is lazy: run what is queued


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
