"""Moving nested batches of oneflow tensors and turning tensors into python numbers.

Only the oneflow calls for one tensor are here; :func:`fastcore_train.utils.nested.map_tensors`
walks the dicts, lists and tuples around them.
"""
from __future__ import annotations

from typing import Any

import oneflow as flow

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.tensor_reader import TensorReader


def move_to_device(data: Any, device: Any) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``, and
    every numeric numpy array made a tensor there (``flow.from_numpy``)."""
    return map_tensors_and_arrays(data, flow.Tensor, lambda array: flow.from_numpy(array).to(device),
                                  lambda tensor: tensor.to(device))


def _tensor_to_numeric(tensor: flow.Tensor) -> Any:
    tensor = tensor.detach()
    return tensor.item() if tensor.numel() == 1 else tensor.cpu().numpy().tolist()


_READER = TensorReader(flow.Tensor, to_number=_tensor_to_numeric)
to_numeric = _READER.to_numeric
to_numpy = _READER.to_numpy
requires_grad = _READER.requires_grad
