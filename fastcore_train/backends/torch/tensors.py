"""Moving nested batches of torch tensors and turning tensors into python numbers.

Only the torch calls for one tensor are here (``from_numpy``, ``to`` with ``non_blocking``,
``item``, ``tolist``); :func:`fastcore_train.utils.nested.map_tensors` walks the containers
around them.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.nested import map_tensors


def move_to_device(data: Any, device: torch.device, non_blocking: bool = True) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``, and
    every numeric numpy array made a tensor there (``torch.from_numpy``)."""
    return map_tensors_and_arrays(data, torch.Tensor, lambda array: torch.from_numpy(array).to(device),
                                  lambda tensor: tensor.to(device, non_blocking=non_blocking))


def _tensor_to_numeric(tensor: torch.Tensor) -> Any:
    tensor = tensor.detach()
    return tensor.item() if tensor.numel() == 1 else tensor.cpu().tolist()


def to_numeric(data: Any) -> Any:
    """Tensors (nested) as python numbers: scalars via ``item()``, others via ``tolist()``."""
    return map_tensors(data, torch.Tensor, _tensor_to_numeric, keep_mapping_type=False)


def to_numpy(data: Any) -> Any:
    """Tensors (nested) as numpy arrays (0-d for scalars), on the host, detached."""
    return map_tensors(data, torch.Tensor, lambda tensor: tensor.detach().cpu().numpy(), keep_mapping_type=False)


def requires_grad(value: Any) -> Optional[bool]:
    """Whether ``value`` is a tensor that backward can train from (None: not a torch.Tensor)."""
    if not isinstance(value, torch.Tensor):
        return None
    return bool(value.requires_grad)
