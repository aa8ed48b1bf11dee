"""Setups for the docs examples: what a block marked ``<!-- example: ENV, setup -->`` takes as given.

Each ``<name>.py`` here is star-imported before the block runs; the backend ones define
``model`` (the demo's MLP: ``train_step(x, target)``, ``evaluate_step(x)``), ``train_loader``,
``dev_loader``, ``test_loader`` (batches ``{"x": ..., "target": ...}``), ``optimizer`` and the
names the pages use without importing (``Trainer``, ``Accuracy``, ...). The data are a small slice
of the shipped digits so that every example trains in seconds on CPU.
"""
from __future__ import annotations

import importlib
from typing import Any

from fastcore_train.data import DigitsData, load_digits


def small_digits(train: int = 256, test: int = 128) -> DigitsData:
    """The first ``train`` training and ``test`` test samples of the shipped digits."""
    data = load_digits()
    return DigitsData(data.x_train[:train], data.y_train[:train], data.x_test[:test], data.y_test[:test])


def small_demo(backend: str) -> tuple[Any, Any, Any, Any]:
    """``(model, train_loader, dev_loader, optimizer)``: the demo task of ``backend`` on :func:`small_digits`."""
    build_demo = importlib.import_module(f"fastcore_train.backends.{backend}.demo").build_demo
    task = build_demo(small_digits(), hidden=32, lr=3e-3, batch_size=32, seed=0)
    return task.model, task.train_dataloader, task.evaluate_dataloader, task.optimizer
