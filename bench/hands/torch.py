"""The hand loop in PyTorch: ``torch.utils.data.DataLoader`` over a map-style dataset."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, Dataset

from bench.hands import BATCH_SIZE, LR, SIZES, make_data

NAME = "torch"
TRAINER_KWARGS = {"driver": "torch", "device": "cpu"}


def version() -> str:
    return torch.__version__


def configure(threads: int) -> None:
    torch.set_num_threads(threads)


class MLP(torch.nn.Module):
    def __init__(self, sizes: tuple[int, ...] = SIZES) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            if i:
                layers.append(torch.nn.ReLU())
            layers.append(torch.nn.Linear(n_in, n_out))
        self.layers = torch.nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.cross_entropy(self(x), y)}


class DictDataset(Dataset):
    """Rows of pre-generated arrays as ``{"x": ..., "y": ...}`` samples."""

    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "y": self.y[index]}


def build_task(batches: int, seed: int = 0):
    dataset = DictDataset(*make_data(batches, seed))

    def loader() -> DataLoader:
        return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False)

    def model_and_optimizer():
        torch.manual_seed(seed)  # every contender starts from the same weights
        model = MLP()
        return model, torch.optim.SGD(model.parameters(), lr=LR)
    return loader, model_and_optimizer


def hand_epoch(loader, model, optimizer) -> Callable[[], None]:
    cross_entropy = torch.nn.functional.cross_entropy

    def epoch() -> None:
        model.train()
        for batch in loader:
            loss = cross_entropy(model(batch["x"]), batch["y"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)  # what the torch driver does by default
    return epoch


def finish() -> None:
    """Eager and synchronous on CPU: nothing is queued."""


def weights(model) -> list:
    return [p.detach().numpy().copy() for p in model.parameters()]
