"""The hand loop in OneFlow: ``oneflow.utils.data.DataLoader`` over a map-style dataset."""
from __future__ import annotations

from typing import Any, Callable

import oneflow as flow
from oneflow.utils.data import DataLoader, Dataset

from bench.hands import BATCH_SIZE, LR, SIZES, make_data

NAME = "oneflow"
TRAINER_KWARGS = {"driver": "oneflow", "device": "cpu"}
# This MLP draws no random numbers, so the driver's default (reseed="auto") does not reseed per
# backward; "every_backward" (what a model with dropout modules gets) shows what that reseed costs.
EXTRA_TRAINERS = {"trainer+every_backward": {"oneflow_kwargs": {"reseed": "every_backward"}}}


def version() -> str:
    return flow.__version__


def configure(threads: int) -> None:
    """Threads: OMP_NUM_THREADS, set by the bench before the import."""


class MLP(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[flow.nn.Module] = []
        for i, (n_in, n_out) in enumerate(zip(SIZES, SIZES[1:])):
            if i:
                layers.append(flow.nn.ReLU())
            layers.append(flow.nn.Linear(n_in, n_out))
        self.layers = flow.nn.Sequential(*layers)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.layers(x)

    def train_step(self, x: flow.Tensor, y: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"loss": flow.nn.functional.cross_entropy(self(x), y)}


class DictDataset(Dataset):
    """Rows of pre-generated arrays as ``{"x": ..., "y": ...}`` samples."""

    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = flow.from_numpy(x), flow.from_numpy(y)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, flow.Tensor]:
        return {"x": self.x[index], "y": self.y[index]}


def build_task(batches: int, seed: int = 0):
    dataset = DictDataset(*make_data(batches, seed))

    def loader() -> DataLoader:
        return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False)

    def model_and_optimizer():
        flow.manual_seed(seed)  # every contender starts from the same weights
        model = MLP()
        return model, flow.optim.SGD(model.parameters(), lr=LR)
    return loader, model_and_optimizer


def hand_epoch(loader, model, optimizer) -> Callable[[], None]:
    cross_entropy = flow.nn.functional.cross_entropy

    def epoch() -> None:
        model.train()
        for batch in loader:
            loss = cross_entropy(model(batch["x"]), batch["y"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()  # oneflow's default (set_to_none=False), as the driver's
    return epoch


def finish() -> None:
    flow._oneflow_internal.eager.Sync()  # oneflow runs ops asynchronously: wait for them


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
