"""Moving nested batches of paddle tensors to a place (``"cpu"``, ``"gpu:0"``) and turning tensors
into python numbers; the walk through nested containers is :func:`~fastcore_train.utils.nested.map_tensors`."""
from __future__ import annotations

from typing import Any

import paddle

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.tensor_reader import TensorReader


def move_to_device(data: Any, device: str) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``, and
    every numeric numpy array made a tensor there (``paddle.to_tensor``)."""
    return map_tensors_and_arrays(data, paddle.Tensor, lambda array: paddle.to_tensor(array, place=device),
                                  lambda tensor: tensor.to(device))


def _tensor_to_numeric(tensor: paddle.Tensor) -> Any:
    tensor = tensor.detach()
    return tensor.item() if int(tensor.size) == 1 else tensor.tolist()


_READER = TensorReader(paddle.Tensor, to_number=_tensor_to_numeric, to_array=lambda tensor: tensor.numpy(),
                       trainable=lambda tensor: not tensor.stop_gradient)
to_numeric = _READER.to_numeric
to_numpy = _READER.to_numpy
requires_grad = _READER.requires_grad
