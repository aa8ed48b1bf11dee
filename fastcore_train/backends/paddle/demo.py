"""The demo task in paddle: the shared MLP (:mod:`fastcore_train.data.digits_task`) as a
``paddle.nn.Layer``, ``paddle.io`` dataloaders over the numpy arrays (paddle collates them into
tensors), and Adam."""
from __future__ import annotations

import numpy as np
import paddle
from paddle.io import DataLoader, Dataset

from fastcore_train.data import DigitsData
from fastcore_train.data.digits_task import DemoFramework, DemoMLP, DemoTask, SizedArrayRows, build_demo_task


class DigitsMLP(DemoMLP, paddle.nn.Layer):
    """The demo MLP as a paddle layer."""

    nn = paddle.nn
    cross_entropy = staticmethod(paddle.nn.functional.cross_entropy)


class ArrayDataset(SizedArrayRows, Dataset):
    """Rows of two numpy arrays as ``{"x": ..., "target": ...}`` samples."""


def _dataloader(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool, seed: int) -> DataLoader:
    rows = ArrayDataset(np.ascontiguousarray(x, dtype=np.float32), np.ascontiguousarray(y, dtype=np.int64))
    return DataLoader(rows, batch_size=batch_size, shuffle=shuffle)


#: The framework's calls for the demo (also used by the digits config functions, fastcore_train.demo.config).
FRAMEWORK = DemoFramework(
    seed=paddle.seed, model=DigitsMLP, dataloader=_dataloader,
    optimizer=lambda model, lr: paddle.optimizer.Adam(learning_rate=lr, parameters=model.parameters()))


def build_demo(data: DigitsData, hidden: int, lr: float, batch_size: int, seed: int) -> DemoTask:
    """The demo's model, dataloaders and optimizer in paddle."""
    return build_demo_task(FRAMEWORK, data, hidden, lr, batch_size, seed)
