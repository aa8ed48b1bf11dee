"""The demo's digits task as three functions a config file names, for any backend.

``examples/digits.yaml`` trains the shipped digits with ``fastcore-train fit``; its model, data and
optimizer sections name these functions, each told the backend by ``driver`` (the command line
links ``trainer.driver`` to it), so ``--trainer.driver paddle`` switches the whole task. In order
(seed, model, dataloaders, optimizer) they build what :func:`fastcore_train.data.digits_task.build_demo_task`
builds.
"""
from __future__ import annotations

from typing import Any

from fastcore_train.data import load_digits
from fastcore_train.data.digits_task import EVALUATE_BATCH_SIZE, DemoFramework
from fastcore_train.drivers.registry import backend_for_driver_name, load_backend_part


def _framework(driver: str) -> DemoFramework:
    name = "torch" if driver == "auto" else driver
    return load_backend_part(backend_for_driver_name(name), "demo").FRAMEWORK


def digits_model(driver: str = "torch", hidden: int = 128, seed: int = 0) -> Any:
    """Seed the framework with ``seed``, then the demo MLP (64 pixels -> ``hidden`` -> 10 classes)."""
    framework = _framework(driver)
    data = load_digits()
    framework.seed(seed)
    return framework.model(data.num_features, hidden, data.num_classes)


def digits_dataloaders(driver: str = "torch", batch_size: int = 32, seed: int = 0) -> dict[str, Any]:
    """``{"train_dataloader": shuffled train rows, "evaluate_dataloaders": {"test": test rows}}``."""
    framework = _framework(driver)
    data = load_digits()
    train = framework.dataloader(data.x_train, data.y_train, batch_size, True, seed)
    test = framework.dataloader(data.x_test, data.y_test, EVALUATE_BATCH_SIZE, False, seed)
    return {"train_dataloader": train, "evaluate_dataloaders": {"test": test}}


def digits_adam(model: Any, driver: str = "torch", lr: float = 3e-3) -> Any:
    """Adam over ``model``'s parameters, in the backend's framework."""
    return _framework(driver).optimizer(model, lr)
