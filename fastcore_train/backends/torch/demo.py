"""The demo task in torch: the shared MLP as a ``torch.nn.Module``, tensor datasets, Adam.

What every backend shares is :mod:`fastcore_train.data.digits_task`; only torch's calls are here.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from fastcore_train.data import DigitsData
from fastcore_train.data.digits_task import DemoFramework, DemoMLP, DemoTask, SizedArrayRows, build_demo_task


class DigitsMLP(DemoMLP, torch.nn.Module):
    """The demo MLP as a torch module."""

    nn = torch.nn
    cross_entropy = staticmethod(torch.nn.functional.cross_entropy)


class ArrayDataset(SizedArrayRows, Dataset):
    """Rows of two tensors as ``{"x": ..., "target": ...}`` samples."""


def _dataloader(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool, seed: int) -> DataLoader:
    # A generator of its own makes the shuffling order depend on the seed only.
    generator = torch.Generator().manual_seed(seed) if shuffle else None
    dataset = ArrayDataset(torch.from_numpy(x), torch.from_numpy(y))
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=generator)


#: The framework's calls for the demo (also used by the digits config functions, fastcore_train.demo.config).
FRAMEWORK = DemoFramework(seed=torch.manual_seed, model=DigitsMLP, dataloader=_dataloader,
                          optimizer=lambda model, lr: torch.optim.Adam(model.parameters(), lr=lr))


def build_demo(data: DigitsData, hidden: int, lr: float, batch_size: int, seed: int) -> DemoTask:
    """The demo's model, dataloaders and optimizer in torch."""
    return build_demo_task(FRAMEWORK, data, hidden, lr, batch_size, seed)
