"""The demo task in oneflow (the shared :mod:`fastcore_train.data.digits_task` with oneflow's module,
dataset, dataloader and Adam)."""
from __future__ import annotations

import numpy as np
import oneflow as flow
from oneflow.utils.data import DataLoader, Dataset

from fastcore_train.data import DigitsData
from fastcore_train.data.digits_task import DemoFramework, DemoMLP, DemoTask, SizedArrayRows, build_demo_task


class DigitsMLP(DemoMLP, flow.nn.Module):
    """The demo MLP as a oneflow module."""

    nn = flow.nn
    cross_entropy = staticmethod(flow.nn.functional.cross_entropy)


class ArrayDataset(SizedArrayRows, Dataset):
    """Rows of two oneflow tensors as ``{"x": ..., "target": ...}`` samples."""


def _dataloader(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool, seed: int) -> DataLoader:
    return DataLoader(ArrayDataset(flow.from_numpy(x), flow.from_numpy(y)), batch_size=batch_size, shuffle=shuffle)


def _adam(model: flow.nn.Module, lr: float) -> flow.optim.Optimizer:
    return flow.optim.Adam(model.parameters(), lr=lr)


#: The framework's calls for the demo (also used by the digits config functions, fastcore_train.demo.config).
FRAMEWORK = DemoFramework(seed=flow.manual_seed, model=DigitsMLP, dataloader=_dataloader, optimizer=_adam)


def build_demo(data: DigitsData, hidden: int, lr: float, batch_size: int, seed: int) -> DemoTask:
    """The demo's model, dataloaders and optimizer in oneflow (shuffling follows ``flow.manual_seed``)."""
    return build_demo_task(FRAMEWORK, data, hidden, lr, batch_size, seed)
