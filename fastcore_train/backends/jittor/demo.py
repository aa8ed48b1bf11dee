"""The demo task in jittor: an MLP, datasets over the digits arrays, and Adam."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jittor as jt
import numpy as np
from jittor.dataset import Dataset


class DigitsMLP(jt.Module):
    """64 -> hidden -> 10 with ReLU; ``train_step`` returns the loss, ``evaluate_step`` the logits."""

    def __init__(self, num_features: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        self.layers = jt.nn.Sequential(jt.nn.Linear(num_features, hidden), jt.nn.ReLU(),
                                       jt.nn.Linear(hidden, num_classes))

    def execute(self, x: jt.Var) -> jt.Var:
        return self.layers(x)

    def train_step(self, x: jt.Var, target: jt.Var) -> dict[str, jt.Var]:
        return {"loss": jt.nn.cross_entropy_loss(self(x), target)}

    def evaluate_step(self, x: jt.Var) -> dict[str, jt.Var]:
        return {"pred": self(x)}


class ArrayDataset(Dataset):
    """Rows of two numpy arrays as ``{"x": ..., "target": ...}`` samples (jittor collates them)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool = False) -> None:
        super().__init__()
        self.x = np.ascontiguousarray(x, dtype=np.float32)
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.set_attrs(total_len=len(self.x), batch_size=batch_size, shuffle=shuffle)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {"x": self.x[index], "target": self.y[index]}


@dataclass
class DemoTask:
    model: jt.Module
    train_dataloader: Dataset
    evaluate_dataloader: Dataset
    optimizer: jt.optim.Optimizer


def build_demo(data: Any, hidden: int, lr: float, batch_size: int, seed: int) -> DemoTask:
    jt.sync_all()
    jt.set_seed(seed)
    model = DigitsMLP(data.num_features, hidden, data.num_classes)
    train = ArrayDataset(data.x_train, data.y_train, batch_size, shuffle=True)
    test = ArrayDataset(data.x_test, data.y_test, 256)
    return DemoTask(model, train, test, jt.optim.Adam(model.parameters(), lr=lr))
