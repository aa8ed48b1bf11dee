"""The hand loop in OneFlow: ``oneflow.utils.data.DataLoader`` over a map-style dataset."""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import oneflow as flow
import oneflow.nn.functional as F
from oneflow.utils.data import DataLoader, Dataset

from bench.hands import BATCH_SIZE, LR, SIZES, make_data
from bench.hands.workloads import LOADER_SIZES, Workload

NAME = "oneflow"
TRAINER_KWARGS = {"driver": "oneflow", "device": "cpu"}
# This MLP draws no random numbers, so the driver's default (reseed="auto") does not reseed per
# backward; "every_backward" (what a model with dropout modules gets) shows what that reseed costs.
EXTRA_TRAINERS = {"trainer+every_backward": {"oneflow_kwargs": {"reseed": "every_backward"}}}
# oneflow's generators cannot be restored, so for a model with dropout the Trainer reseeds them after
# every backward (reseed="auto") for exact resume: its dropout masks are not those of a hand loop.
DROPOUT_NOTE = ("the Trainer reseeds oneflow's generators after every backward for a model with dropout "
                "(reseed='auto', for exact resume), so dropout draws other masks than a hand loop seeded once per epoch")
# What the per-backward reseed costs a model with dropout: the Trainer with reseed="on_load" (exact resume
# then needs no draws while training, which dropout breaks; shown for the time only).
DROPOUT_TRAINERS = {"trainer+on_load": {"oneflow_kwargs": {"reseed": "on_load"}}}
_NLL = flow.nn.NLLLoss()  # oneflow 0.9 has no functional nll_loss
LOSSES = {"cross_entropy": F.cross_entropy, "nll": _NLL}


def version() -> str:
    return flow.__version__


def configure(threads: int) -> None:
    """Threads: OMP_NUM_THREADS, set by the bench before the import."""


def seed(value: int) -> None:
    """The framework's global random seed (initial weights; dropout modules own generators of their own)."""
    flow.manual_seed(value)


class MLP(flow.nn.Module):
    def __init__(self, sizes: tuple[int, ...] = SIZES) -> None:
        super().__init__()
        layers: list[flow.nn.Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            if i:
                layers.append(flow.nn.ReLU())
            layers.append(flow.nn.Linear(n_in, n_out))
        self.layers = flow.nn.Sequential(*layers)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.layers(x)

    def train_step(self, x: flow.Tensor, y: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"loss": F.cross_entropy(self(x), y)}


class CNN(flow.nn.Module):
    """pytorch/examples' MNIST net (Accelerate's tutorial's BasicNet): log-probabilities out."""

    def __init__(self, dropout: bool = True) -> None:
        super().__init__()
        self.conv1, self.conv2 = flow.nn.Conv2d(1, 32, 3, 1), flow.nn.Conv2d(32, 64, 3, 1)
        self.pool = flow.nn.MaxPool2d(2)
        self.dropout1 = flow.nn.Dropout(0.25 if dropout else 0.0)
        self.dropout2 = flow.nn.Dropout(0.5 if dropout else 0.0)
        self.fc1, self.fc2 = flow.nn.Linear(9216, 128), flow.nn.Linear(128, 10)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        x = self.pool(F.relu(self.conv2(F.relu(self.conv1(x)))))
        x = F.relu(self.fc1(flow.flatten(self.dropout1(x), 1)))
        return F.log_softmax(self.fc2(self.dropout2(x)), dim=1)

    def train_step(self, x: flow.Tensor, y: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"loss": _NLL(self(x), y)}


class DictDataset(Dataset):
    """Rows of named columns as ``{name: value}`` samples; with ``transform(sample, index)`` applied
    (numpy work in ``__getitem__``, as a real dataset does) when given."""

    def __init__(self, columns: dict[str, np.ndarray], transform: Optional[Callable] = None) -> None:
        self.transform = transform
        self.columns = columns if transform else {k: flow.from_numpy(v) for k, v in columns.items()}
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


def build_model(workload: Workload, seed_value: int, dropout: bool = True) -> flow.nn.Module:
    """The workload's model, the same initial weights for the same seed."""
    if workload.name == "transformer":
        from examples.text_classification.models.oneflow import build_classifier
        return build_classifier(seed=seed_value)  # numpy initial weights, the same on every framework
    seed(seed_value)
    return CNN(dropout) if workload.name == "cnn" else MLP(LOADER_SIZES)


def make_optimizer(kind: str, model: flow.nn.Module, lr: float) -> flow.optim.Optimizer:
    return (flow.optim.Adam if kind == "adam" else flow.optim.SGD)(model.parameters(), lr=lr)


def build_task(batches: int, seed_value: int = 0):
    x, y = make_data(batches, seed_value)
    loader = make_loader({"x": x, "y": y}, BATCH_SIZE)

    def model_and_optimizer():
        seed(seed_value)  # every contender starts from the same weights
        model = MLP()
        return model, flow.optim.SGD(model.parameters(), lr=LR)
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
            optimizer.zero_grad()  # oneflow's default (set_to_none=False), as the driver's
    return epoch


def loader_workers(loader: Any) -> int:
    """Worker processes the loader runs."""
    return loader.num_workers


def finish() -> None:
    flow._oneflow_internal.eager.Sync()  # oneflow runs ops asynchronously: wait for them


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
