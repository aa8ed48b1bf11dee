"""The same MLP and small CNN, optimizers and dataloaders in torch and in paddle, for the parity suite.

No dropout, no batch norm (its running variance is unbiased in torch, biased in paddle): what is
compared is the toolkit's recipe, not the frameworks' differing layer definitions.
"""
from __future__ import annotations

from typing import Any

import paddle
import paddle.nn.functional as PF
import torch
import torch.nn.functional as TF

from tests.numpy_rows import NumpyRows


class Steps:
    """The steps both frameworks' models share; each model class names its ``cross_entropy``."""

    cross_entropy: Any

    def train_step(self, x: Any, y: Any) -> dict[str, Any]:
        return {"loss": self.cross_entropy(self(x), y)}

    def evaluate_step(self, x: Any, y: Any) -> dict[str, Any]:
        return {"pred": self(x).argmax(-1), "target": y}


class TorchMLP(Steps, torch.nn.Module):
    cross_entropy = staticmethod(TF.cross_entropy)

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(64, 32), torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x.reshape(x.shape[0], -1))))


class TorchCNN(TorchMLP):
    def __init__(self) -> None:
        torch.nn.Module.__init__(self)
        self.conv, self.fc = torch.nn.Conv2d(1, 4, 3), torch.nn.Linear(4 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x.reshape(x.shape[0], 1, 8, 8))).reshape(x.shape[0], -1))


class PaddleMLP(Steps, paddle.nn.Layer):
    cross_entropy = staticmethod(PF.cross_entropy)

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = paddle.nn.Linear(64, 32), paddle.nn.Linear(32, 10)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc2(PF.relu(self.fc1(x.reshape([x.shape[0], -1]))))


class PaddleCNN(PaddleMLP):
    def __init__(self) -> None:
        paddle.nn.Layer.__init__(self)
        self.conv, self.fc = paddle.nn.Conv2D(1, 4, 3), paddle.nn.Linear(4 * 6 * 6, 10)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc(PF.relu(self.conv(x.reshape([x.shape[0], 1, 8, 8]))).reshape([x.shape[0], -1]))


class TorchRows(NumpyRows, torch.utils.data.Dataset):
    pass


class PaddleRows(NumpyRows, paddle.io.Dataset):
    pass


TORCH = {
    "models": {"mlp": TorchMLP, "cnn": TorchCNN},
    "loader": lambda x, y, shuffle: torch.utils.data.DataLoader(TorchRows(x, y), batch_size=32, shuffle=shuffle),
    "sgd": lambda model: torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
    "adam": lambda model: torch.optim.Adam(model.parameters(), lr=0.003),
    "seed": torch.manual_seed,
}
PADDLE = {
    "models": {"mlp": PaddleMLP, "cnn": PaddleCNN},
    "loader": lambda x, y, shuffle: paddle.io.DataLoader(PaddleRows(x, y), batch_size=32, shuffle=shuffle),
    "sgd": lambda model: paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9, parameters=model.parameters()),
    "adam": lambda model: paddle.optimizer.Adam(learning_rate=0.003, parameters=model.parameters()),
    "seed": paddle.seed,
}
FRAMEWORKS: dict[str, dict[str, Any]] = {"torch": TORCH, "paddle": PADDLE}
