"""Moving nested batches of oneflow tensors and turning tensors into python numbers.

Only the oneflow calls for one tensor are here; :func:`fastcore_train.utils.nested.map_tensors`
walks the dicts, lists and tuples around them.
"""
from __future__ import annotations

from typing import Any, Optional

import oneflow as flow

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.nested import map_tensors


def move_to_device(data: Any, device: Any) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``, and
    every numeric numpy array made a tensor there (``flow.from_numpy``)."""
    return map_tensors_and_arrays(data, flow.Tensor, lambda array: flow.from_numpy(array).to(device),
                                  lambda tensor: tensor.to(device))


def _tensor_to_numeric(tensor: flow.Tensor) -> Any:
    tensor = tensor.detach()
    return tensor.item() if tensor.numel() == 1 else tensor.cpu().numpy().tolist()


def to_numeric(data: Any) -> Any:
    """Tensors (nested) as python numbers: scalars via ``item()``, others via ``tolist()``."""
    return map_tensors(data, flow.Tensor, _tensor_to_numeric, keep_mapping_type=False)


def to_numpy(data: Any) -> Any:
    """Tensors (nested) as numpy arrays (0-d for scalars), on the host, detached."""
    return map_tensors(data, flow.Tensor, lambda tensor: tensor.detach().cpu().numpy(), keep_mapping_type=False)


def requires_grad(value: Any) -> Optional[bool]:
    """Whether ``value`` is a tensor that backward can train from (None: not a flow.Tensor)."""
    if not isinstance(value, flow.Tensor):
        return None
    return bool(value.requires_grad)
