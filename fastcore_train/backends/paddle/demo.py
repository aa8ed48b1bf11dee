"""The demo task in paddle: an MLP, dataloaders over the digits arrays, and Adam."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import paddle
from paddle.io import DataLoader, Dataset


class DigitsMLP(paddle.nn.Layer):
    """64 -> hidden -> 10 with ReLU; ``train_step`` returns the loss, ``evaluate_step`` the logits."""

    def __init__(self, num_features: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        self.layers = paddle.nn.Sequential(paddle.nn.Linear(num_features, hidden), paddle.nn.ReLU(),
                                           paddle.nn.Linear(hidden, num_classes))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.layers(x)

    def train_step(self, x: paddle.Tensor, target: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"loss": paddle.nn.functional.cross_entropy(self(x), target)}

    def evaluate_step(self, x: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"pred": self(x)}


class ArrayDataset(Dataset):
    """Rows of two numpy arrays as ``{"x": ..., "target": ...}`` samples (collated by paddle)."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x = np.ascontiguousarray(x, dtype=np.float32)
        self.y = np.ascontiguousarray(y, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {"x": self.x[index], "target": self.y[index]}


@dataclass
class DemoTask:
    model: paddle.nn.Layer
    train_dataloader: DataLoader
    evaluate_dataloader: DataLoader
    optimizer: paddle.optimizer.Optimizer


def build_demo(data: Any, hidden: int, lr: float, batch_size: int, seed: int) -> DemoTask:
    paddle.seed(seed)
    model = DigitsMLP(data.num_features, hidden, data.num_classes)
    train = DataLoader(ArrayDataset(data.x_train, data.y_train), batch_size=batch_size, shuffle=True)
    test = DataLoader(ArrayDataset(data.x_test, data.y_test), batch_size=256)
    optimizer = paddle.optimizer.Adam(learning_rate=lr, parameters=model.parameters())
    return DemoTask(model, train, test, optimizer)
