"""Reading a framework's tensors back, inside nested batches and outputs: as python numbers, as
numpy arrays, and whether one can be trained from.

Written once; a backend's ``tensors.py`` builds a :class:`TensorReader` from its tensor class and
its calls on one tensor, and exposes the reader's methods as its ``to_numeric``, ``to_numpy`` and
``requires_grad``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from fastcore_train.utils.nested import TensorType, map_tensors


class TensorReader:
    """``tensor_type``'s reading calls applied through nested containers (:func:`map_tensors`).

    ``to_number(tensor)``: python numbers (a scalar via ``item()``, else ``tolist()``);
    ``to_array(tensor)``: a numpy array on the host; ``trainable(tensor)``: whether backward can
    train from it. The defaults are the calls of torch-style tensors (torch, oneflow).
    """

    def __init__(self, tensor_type: TensorType, to_number: Callable[[Any], Any],
                 to_array: Callable[[Any], Any] = lambda tensor: tensor.detach().cpu().numpy(),
                 trainable: Callable[[Any], Any] = lambda tensor: tensor.requires_grad) -> None:
        self.tensor_type = tensor_type
        self._to_number = to_number
        self._to_array = to_array
        self._trainable = trainable

    def to_numeric(self, data: Any) -> Any:
        """Tensors (nested) as python numbers: one element via ``item()``, others via ``tolist()``."""
        return map_tensors(data, self.tensor_type, self._to_number, keep_mapping_type=False)

    def to_numpy(self, data: Any) -> Any:
        """Tensors (nested) as numpy arrays (0-d for scalars), on the host, detached."""
        return map_tensors(data, self.tensor_type, self._to_array, keep_mapping_type=False)

    def requires_grad(self, value: Any) -> Optional[bool]:
        """Whether ``value`` is a tensor that backward can train from (None: not one of these tensors)."""
        if not isinstance(value, self.tensor_type):
            return None
        return bool(self._trainable(value))
