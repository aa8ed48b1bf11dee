"""The demo task in jittor: the shared MLP (:mod:`fastcore_train.data.digits_task`) as a ``jittor.Module``,
jittor Datasets over the numpy arrays (a jittor Dataset is its own loader), and Adam."""
from __future__ import annotations

import jittor as jt
import numpy as np
from jittor.dataset import Dataset

from fastcore_train.data import DigitsData
from fastcore_train.data.digits_task import ArrayRows, DemoFramework, DemoMLP, DemoTask, build_demo_task


class DigitsMLP(DemoMLP, jt.Module):
    """The demo MLP as a jittor module."""

    nn = jt.nn
    cross_entropy = staticmethod(jt.nn.cross_entropy_loss)


class ArrayDataset(ArrayRows, Dataset):
    """Rows of two numpy arrays as ``{"x": ..., "target": ...}`` samples (jittor collates them).

    ``len()`` is jittor's: it counts batches, while ``total_len`` counts the samples.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool = False) -> None:
        super().__init__()
        self.x = np.ascontiguousarray(x, dtype=np.float32)
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.set_attrs(total_len=len(self.x), batch_size=batch_size, shuffle=shuffle)


def _seed(seed: int) -> None:
    jt.sync_all()
    jt.set_seed(seed)


#: The framework's calls for the demo (also used by the digits config functions, fastcore_train.demo.config).
FRAMEWORK = DemoFramework(
    seed=_seed, model=DigitsMLP,
    dataloader=lambda x, y, size, shuffle, _: ArrayDataset(x, y, size, shuffle=shuffle),
    optimizer=lambda model, lr: jt.optim.Adam(model.parameters(), lr=lr))


def build_demo(data: DigitsData, hidden: int, lr: float, batch_size: int, seed: int) -> DemoTask:
    """The demo's model, datasets and optimizer in jittor (shuffling follows ``jt.set_seed``)."""
    return build_demo_task(FRAMEWORK, data, hidden, lr, batch_size, seed)
