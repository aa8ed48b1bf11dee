"""The demo task in oneflow: an MLP, dataloaders over the digits arrays, and Adam."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import oneflow as flow
from oneflow.utils.data import DataLoader, Dataset


class DigitsMLP(flow.nn.Module):
    """64 -> hidden -> 10 with ReLU; ``train_step`` returns the loss, ``evaluate_step`` the logits."""

    def __init__(self, num_features: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        self.layers = flow.nn.Sequential(flow.nn.Linear(num_features, hidden), flow.nn.ReLU(),
                                         flow.nn.Linear(hidden, num_classes))

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.layers(x)

    def train_step(self, x: flow.Tensor, target: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"loss": flow.nn.functional.cross_entropy(self(x), target)}

    def evaluate_step(self, x: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"pred": self(x)}


class ArrayDataset(Dataset):
    """Rows of two numpy arrays as ``{"x": ..., "target": ...}`` samples."""

    def __init__(self, x: Any, y: Any) -> None:
        self.x = flow.from_numpy(x)
        self.y = flow.from_numpy(y)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, flow.Tensor]:
        return {"x": self.x[index], "target": self.y[index]}


@dataclass
class DemoTask:
    model: flow.nn.Module
    train_dataloader: DataLoader
    evaluate_dataloader: DataLoader
    optimizer: flow.optim.Optimizer


def build_demo(data: Any, hidden: int, lr: float, batch_size: int, seed: int) -> DemoTask:
    flow.manual_seed(seed)
    model = DigitsMLP(data.num_features, hidden, data.num_classes)
    train = DataLoader(ArrayDataset(data.x_train, data.y_train), batch_size=batch_size, shuffle=True)
    test = DataLoader(ArrayDataset(data.x_test, data.y_test), batch_size=256)
    return DemoTask(model, train, test, flow.optim.Adam(model.parameters(), lr=lr))
