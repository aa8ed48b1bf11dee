"""The demo task, written once for every backend: the MLP's layout and steps, array datasets, and
how model, dataloaders and optimizer are put together.

``python -m fastcore_train demo`` trains the same task with any backend (see
:mod:`fastcore_train.demo`). Nothing here imports a framework: a backend's ``build_demo`` mixes
:class:`DemoMLP` and :class:`ArrayRows` into its framework's module and dataset classes, names its
seeding, dataloader and optimizer calls in a :class:`DemoFramework`, and calls
:func:`build_demo_task`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastcore_train.data import DigitsData

#: Batch size of the evaluation dataloader.
EVALUATE_BATCH_SIZE = 256


@dataclass
class DemoTask:
    """What the demo trains: a model, its train and evaluation dataloaders, and its optimizer."""

    model: Any
    train_dataloader: Any
    evaluate_dataloader: Any
    optimizer: Any


class DemoMLP:
    """``num_features -> hidden -> num_classes`` with ReLU; ``train_step`` returns the loss,
    ``evaluate_step`` the logits.

    A mixin, listed before the framework's module class: the backend's class sets ``nn`` (the
    framework's namespace holding ``Sequential``, ``Linear`` and ``ReLU``) and ``cross_entropy``
    (a static method ``(logits, target) -> loss``).
    """

    nn: Any
    cross_entropy: Callable[[Any, Any], Any]

    def __init__(self, num_features: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        nn = self.nn
        self.layers = nn.Sequential(nn.Linear(num_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, x: Any) -> Any:
        return self.layers(x)

    #: jittor calls a module's forward computation ``execute``.
    execute = forward

    def train_step(self, x: Any, target: Any) -> dict[str, Any]:
        return {"loss": self.cross_entropy(self(x), target)}

    def evaluate_step(self, x: Any) -> dict[str, Any]:
        return {"pred": self(x)}


class ArrayRows:
    """Samples ``{"x": x[i], "target": y[i]}`` from the rows of the arrays ``self.x`` and ``self.y``
    (a mixin for a framework's dataset class, which sets them)."""

    x: Any
    y: Any

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"x": self.x[index], "target": self.y[index]}


class SizedArrayRows(ArrayRows):
    """:class:`ArrayRows` over the ``x`` and ``y`` it is built with; ``len()`` counts the rows."""

    def __init__(self, x: Any, y: Any) -> None:
        self.x = x
        self.y = y

    def __len__(self) -> int:
        return len(self.x)


@dataclass(frozen=True)
class DemoFramework:
    """A framework's calls for the demo.

    ``seed(seed)``: seed the framework's generators; ``model(num_features, hidden, num_classes)``:
    the MLP; ``dataloader(x, y, batch_size, shuffle, seed)``: a dataloader over two numpy arrays;
    ``optimizer(model, lr)``: Adam over the model's parameters.
    """

    seed: Callable[[int], Any]
    model: Callable[[int, int, int], Any]
    dataloader: Callable[[np.ndarray, np.ndarray, int, bool, int], Any]
    optimizer: Callable[[Any, float], Any]


def build_demo_task(framework: DemoFramework, data: DigitsData, hidden: int, lr: float, batch_size: int,
                    seed: int) -> DemoTask:
    """Seed, then build the model, the shuffled train and the sequential test dataloader, and Adam."""
    framework.seed(seed)
    model = framework.model(data.num_features, hidden, data.num_classes)
    train = framework.dataloader(data.x_train, data.y_train, batch_size, True, seed)
    test = framework.dataloader(data.x_test, data.y_test, EVALUATE_BATCH_SIZE, False, seed)
    return DemoTask(model, train, test, framework.optimizer(model, lr))
