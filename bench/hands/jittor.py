"""The hand loop in Jittor: a ``jittor.dataset.Dataset`` is its own loader (``set_attrs``)."""
from __future__ import annotations

from typing import Any, Callable, Optional

import jittor as jt
import numpy as np
from jittor.dataset import Dataset

from bench.hands import BATCH_SIZE, LR, SIZES, make_data
from bench.hands.workloads import LOADER_SIZES, Workload

NAME = "jittor"
TRAINER_KWARGS = {"driver": "jittor", "device": "cpu"}
LOSSES = {"cross_entropy": jt.nn.cross_entropy_loss, "nll": jt.nn.nll_loss}


# Jittor runs its graph lazily and fuses what is queued when a value is read: a loop that reads the
# loss (a progress bar showing it) rounds differently (~1e-8) from one that never does, hand-written or not.
ROUNDING_NOTE = "jittor fuses its lazy graph where a value is read: a bar showing the loss rounds differently"
# Jittor's generator cannot be read back, so the Trainer reseeds it before every step from (seed, rank,
# step) for exact resume: its dropout masks are not those of a hand loop seeded once per epoch.
DROPOUT_NOTE = ("the Trainer reseeds jittor before every step (for exact resume), so dropout draws other masks "
                "than a hand loop seeded once per epoch")


def version() -> str:
    return jt.__version__


def configure(threads: int) -> None:
    jt.flags.use_cuda = 0  # threads: OMP_NUM_THREADS, set by the bench before the import


def seed(value: int) -> None:
    """The framework's random seed (initial weights, dropout); queued random ops draw first."""
    jt.sync_all()
    jt.set_seed(value)


class MLP(jt.Module):
    def __init__(self, sizes: tuple[int, ...] = SIZES) -> None:
        super().__init__()
        layers: list[jt.Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            if i:
                layers.append(jt.nn.ReLU())
            layers.append(jt.nn.Linear(n_in, n_out))
        self.layers = jt.nn.Sequential(*layers)

    def execute(self, x: jt.Var) -> jt.Var:
        return self.layers(x)

    def train_step(self, x: jt.Var, y: jt.Var) -> dict[str, jt.Var]:
        return {"loss": jt.nn.cross_entropy_loss(self(x), y)}


class CNN(jt.Module):
    """pytorch/examples' MNIST net (Accelerate's tutorial's BasicNet): log-probabilities out."""

    def __init__(self, dropout: bool = True) -> None:
        super().__init__()
        self.conv1, self.conv2 = jt.nn.Conv2d(1, 32, 3, 1), jt.nn.Conv2d(32, 64, 3, 1)
        self.pool = jt.nn.MaxPool2d(2)
        self.dropout1 = jt.nn.Dropout(0.25 if dropout else 0.0)
        self.dropout2 = jt.nn.Dropout(0.5 if dropout else 0.0)
        self.fc1, self.fc2 = jt.nn.Linear(9216, 128), jt.nn.Linear(128, 10)

    def execute(self, x: jt.Var) -> jt.Var:
        x = self.pool(jt.nn.relu(self.conv2(jt.nn.relu(self.conv1(x)))))
        x = jt.nn.relu(self.fc1(self.dropout1(x).reshape(x.shape[0], -1)))
        return jt.nn.log_softmax(self.fc2(self.dropout2(x)), dim=1)

    def train_step(self, x: jt.Var, y: jt.Var) -> dict[str, jt.Var]:
        return {"loss": jt.nn.nll_loss(self(x), y)}


class DictDataset(Dataset):
    """Rows of named columns as ``{name: value}`` samples; jittor batches them (and runs
    ``num_workers`` worker processes). ``transform(sample, index)`` is applied when given."""

    def __init__(self, columns: dict[str, np.ndarray], transform: Optional[Callable] = None, *,
                 batch_size: int = BATCH_SIZE, num_workers: int = 0) -> None:
        super().__init__()
        self.columns, self.transform = columns, transform
        self.set_attrs(total_len=len(next(iter(columns.values()))), batch_size=batch_size, shuffle=False,
                       num_workers=num_workers)

    def __getitem__(self, index: int) -> dict[str, Any]:
        sample = {name: column[index] for name, column in self.columns.items()}
        return self.transform(sample, index) if self.transform else sample


def make_loader(columns: dict[str, np.ndarray], batch_size: int, workers: int = 0,
                transform: Optional[Callable] = None) -> Callable[[], DictDataset]:
    """A factory of fresh loaders of this framework's own kind (a dataset) over the same samples, in order."""
    return lambda: DictDataset(columns, transform, batch_size=batch_size, num_workers=workers)


def build_model(workload: Workload, seed_value: int, dropout: bool = True) -> jt.Module:
    """The workload's model, the same initial weights for the same seed."""
    if workload.name == "transformer":
        from examples.text_classification.models.jittor import build_classifier
        return build_classifier(seed=seed_value)  # numpy initial weights, the same on every framework
    seed(seed_value)
    return CNN(dropout) if workload.name == "cnn" else MLP(LOADER_SIZES)


def make_optimizer(kind: str, model: jt.Module, lr: float) -> jt.optim.Optimizer:
    return (jt.optim.Adam if kind == "adam" else jt.optim.SGD)(model.parameters(), lr=lr)


def build_task(batches: int, seed_value: int = 0):
    x, y = make_data(batches, seed_value)
    loader = make_loader({"x": x, "y": y}, BATCH_SIZE)

    def model_and_optimizer():
        seed(seed_value)  # every contender starts from the same weights
        model = MLP()
        return model, jt.optim.SGD(model.parameters(), lr=LR)
    return loader, model_and_optimizer


def hand_epoch(loader, model, optimizer, loss: str = "cross_entropy", keys: tuple[str, str] = ("x", "y")
               ) -> Callable[[], None]:
    loss_fn, (inputs, target) = LOSSES[loss], keys

    def epoch() -> None:
        model.train()
        for batch in loader:
            optimizer.step(loss_fn(model(batch[inputs]), batch[target]))  # backward, update, zero the grads
    return epoch


def loader_workers(loader: Any) -> int:
    """Worker processes the loader runs: a jittor Dataset's ``num_workers``, which the Trainer's
    copy of one (``SampledDataset``) keeps."""
    return int(getattr(loader, "num_workers", 0) or 0)


def finish() -> None:
    jt.sync_all(True)  # jittor is lazy: run what is queued


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
