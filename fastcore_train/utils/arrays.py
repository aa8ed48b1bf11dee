"""Turning framework tensors into numpy arrays without importing any framework.

Every supported framework's tensor exposes ``numpy()`` (after ``detach()``/``cpu()`` where those
exist), so duck typing is enough and keeps this module free of framework imports.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(value: Any) -> np.ndarray:
    """Return ``value`` (a tensor of any supported framework, array, list or scalar) as numpy."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (int, float, bool, list, tuple, np.generic)):
        return np.asarray(value)
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "cpu"):
        value = value.cpu()
    if not hasattr(value, "numpy"):
        raise TypeError(
            f"Cannot convert an object of type {type(value).__name__} to a numpy array: expected a "
            "tensor of torch, paddle, jittor or oneflow, a numpy array, a list or a number."
        )
    try:
        return np.asarray(value.numpy())
    except TypeError:
        # e.g. torch bfloat16 has no numpy dtype: widen to float32 first.
        return np.asarray(value.float().numpy())
