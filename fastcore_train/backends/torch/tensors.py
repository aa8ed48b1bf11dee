"""Moving nested batches of torch tensors and turning tensors into python numbers.

Only the torch calls for one tensor are here (``from_numpy``, ``to`` with ``non_blocking``,
``item``, ``tolist``); :func:`fastcore_train.utils.nested.map_tensors` walks the containers
around them.
"""
from __future__ import annotations

from typing import Any

import torch

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.tensor_reader import TensorReader


def move_to_device(data: Any, device: torch.device, non_blocking: bool = True) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``, and
    every numeric numpy array made a tensor there (``torch.from_numpy``)."""
    return map_tensors_and_arrays(data, torch.Tensor, lambda array: torch.from_numpy(array).to(device),
                                  lambda tensor: tensor.to(device, non_blocking=non_blocking))


def _tensor_to_numeric(tensor: torch.Tensor) -> Any:
    tensor = tensor.detach()
    return tensor.item() if tensor.numel() == 1 else tensor.cpu().tolist()


def _tensor_to_array(tensor: torch.Tensor) -> Any:
    # numpy has no bfloat16 (torch's CPU autocast type): such tensors come back as float32.
    tensor = tensor.detach()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).cpu().numpy()


_READER = TensorReader(torch.Tensor, to_number=_tensor_to_numeric, to_array=_tensor_to_array)
to_numeric = _READER.to_numeric
to_numpy = _READER.to_numpy
requires_grad = _READER.requires_grad
