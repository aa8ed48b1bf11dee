"""Between framework tensors and numpy arrays, without importing any framework: tensors read as
numpy (for metrics), and numpy arrays in batches turned into tensors by a backend's own call.

Every supported framework's tensor exposes ``numpy()`` (after ``detach()``/``cpu()`` where those
exist), so duck typing is enough and keeps this module free of framework imports.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fastcore_train.utils.nested import TensorType, map_tensors


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


#: numpy dtype kinds that become framework tensors in a batch: bool, signed and unsigned ints,
#: floats, complex. Strings and objects (a text column) stay numpy arrays.
NUMERIC_KINDS = frozenset("biufc")


def holds_arrays(data: Any) -> bool:
    """Whether a (nested) batch holds a numpy array, so that the driver must turn it into tensors."""
    if isinstance(data, np.ndarray):
        return True
    if isinstance(data, Mapping):
        return any(holds_arrays(value) for value in data.values())
    if isinstance(data, (list, tuple)):
        return any(holds_arrays(value) for value in data)
    return False


def map_tensors_and_arrays(data: Any, tensor_type: TensorType, from_numpy: Callable[[np.ndarray], Any],
                           move: Callable[[Any], Any]) -> Any:
    """``data`` with every tensor passed through ``move`` and every numeric numpy array made a
    framework tensor by ``from_numpy`` (which also puts it on the device).

    Plain data (lists of numpy batches, numpy-returning datasets, Hugging Face datasets in numpy
    format) thus reaches the model as the framework's tensors; a read-only array (as Arrow-backed
    datasets hand out) is copied first, since frameworks share a writable array's memory.
    """
    def convert(value: Any) -> Any:
        if not isinstance(value, np.ndarray):
            return move(value)
        if value.dtype.kind not in NUMERIC_KINDS:
            return value
        return from_numpy(value if value.flags.writeable else value.copy())

    return map_tensors(data, (tensor_type, np.ndarray), convert)
