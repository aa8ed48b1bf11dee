"""Moving nested batches of paddle tensors to a place (``"cpu"``, ``"gpu:0"``) and turning tensors
into python numbers; the walk through nested containers is :func:`~fastcore_train.utils.nested.map_tensors`."""
from __future__ import annotations

from typing import Any, Optional

import paddle

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.nested import map_tensors


def move_to_device(data: Any, device: str) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``, and
    every numeric numpy array made a tensor there (``paddle.to_tensor``)."""
    return map_tensors_and_arrays(data, paddle.Tensor, lambda array: paddle.to_tensor(array, place=device),
                                  lambda tensor: tensor.to(device))


def _tensor_to_numeric(tensor: paddle.Tensor) -> Any:
    tensor = tensor.detach()
    return tensor.item() if int(tensor.size) == 1 else tensor.tolist()


def to_numeric(data: Any) -> Any:
    """Tensors (nested) as python numbers: one element via ``item()``, others via ``tolist()``."""
    return map_tensors(data, paddle.Tensor, _tensor_to_numeric, keep_mapping_type=False)


def to_numpy(data: Any) -> Any:
    """Tensors (nested) as numpy arrays (0-d for scalars), on the host, detached."""
    return map_tensors(data, paddle.Tensor, lambda tensor: tensor.numpy(), keep_mapping_type=False)


def requires_grad(value: Any) -> Optional[bool]:
    """Whether ``value`` is a tensor that backward can train from (None: not a paddle.Tensor)."""
    if not isinstance(value, paddle.Tensor):
        return None
    return bool(not value.stop_gradient)
