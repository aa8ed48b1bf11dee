"""The demo task in torch: an MLP, dataloaders over the digits arrays, and Adam."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset


class DigitsMLP(torch.nn.Module):
    """64 -> hidden -> 10 with ReLU; ``train_step`` returns the loss, ``evaluate_step`` the logits."""

    def __init__(self, num_features: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(num_features, hidden), torch.nn.ReLU(),
                                          torch.nn.Linear(hidden, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)

    def train_step(self, x: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.cross_entropy(self(x), target)}

    def evaluate_step(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"pred": self(x)}


class ArrayDataset(Dataset):
    """Rows of two numpy arrays as ``{"x": ..., "target": ...}`` samples."""

    def __init__(self, x: Any, y: Any) -> None:
        self.x = torch.from_numpy(x)
        self.y = torch.from_numpy(y)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "target": self.y[index]}


@dataclass
class DemoTask:
    model: torch.nn.Module
    train_dataloader: DataLoader
    evaluate_dataloader: DataLoader
    optimizer: torch.optim.Optimizer


def build_demo(data: Any, hidden: int, lr: float, batch_size: int, seed: int) -> DemoTask:
    torch.manual_seed(seed)
    model = DigitsMLP(data.num_features, hidden, data.num_classes)
    generator = torch.Generator().manual_seed(seed)
    train = DataLoader(ArrayDataset(data.x_train, data.y_train), batch_size=batch_size, shuffle=True,
                       generator=generator)
    test = DataLoader(ArrayDataset(data.x_test, data.y_test), batch_size=256)
    return DemoTask(model, train, test, torch.optim.Adam(model.parameters(), lr=lr))
