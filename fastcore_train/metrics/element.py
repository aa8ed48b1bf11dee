"""``Element``: one declared piece of a metric's state, holding a tensor of its backend.

An element behaves like its tensor (fastNLP's ``Element``): arithmetic and comparisons work
with numbers, tensors and other elements, a one-value result coming back as a python number;
``get_scalar()``, ``fill_value()``, ``to(device)``, ``value`` and every attribute of the tensor
(``item()``, ``shape``, ``tolist()``...) are there. Its reduction over ranks is written once, in
:meth:`fastcore_train.metrics.Metric.aggregate`.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Optional

import numpy as np

from fastcore_train.metrics.element_ops import NUMPY_OPS, ElementOps

__all__ = ["Element"]


class Element:
    """A metric state value of backend ``ops`` (see :mod:`fastcore_train.metrics.element_ops`).

    :param name: the attribute name in its metric.
    :param value: the initial value (number, list or numpy array); :meth:`reset` restores it.
    :param aggregate_method: ``"sum"``, ``"mean"``, ``"max"``, ``"min"``, or None (not reduced;
        an error in an evaluation whose ranks each saw part of the data).
    :param ops: the backend; None while the metric's ``backend="auto"`` is not yet known (the
        value is numpy until then).
    """

    __hash__ = None  # type: ignore[assignment]  # compares like a tensor, so not hashable

    def __init__(self, name: str, value: Any, aggregate_method: Optional[str],
                 ops: Optional[ElementOps] = None, device: Any = None) -> None:
        self.name = name
        self.aggregate_method = aggregate_method
        self.init_value = np.array(value)
        self.fixed_backend = ops is not None
        self.ops = ops or NUMPY_OPS
        self.device = device
        self._value = self.ops.from_numpy(self.init_value, device)

    # ------------------------------------------------------------------ the value
    @property
    def backend(self) -> str:
        return self.ops.name

    @property
    def value(self) -> Any:
        """The tensor (numpy array for the numpy backend)."""
        return self._value

    @value.setter
    def value(self, value: Any) -> None:
        self._value = self._as_tensor(value)

    def bind(self, ops: ElementOps, device: Any = None) -> None:
        """Move the value to backend ``ops`` (on ``device``); done once, when ``"auto"`` is resolved."""
        array = self.numpy()
        self.ops, self.device = ops, device if device is not None else self.device
        self._value = ops.from_numpy(array, self.device)

    def numpy(self) -> np.ndarray:
        """The value as a numpy array."""
        return self.ops.to_numpy(self._value)

    def get_scalar(self) -> Any:
        """The value as a python number; the element must hold exactly one value."""
        array = self.numpy()
        if array.size != 1:
            raise ValueError(f"Element {self.name!r} holds {array.size} values (shape {array.shape}); get_scalar() "
                             "needs one. Read .value (the tensor) or .numpy() instead.")
        return array.reshape(()).item()

    def fill_value(self, value: Any) -> None:
        """Set every entry to the number ``value``; an int element filled with a fraction becomes float."""
        array = self.numpy()
        dtype = np.result_type(array.dtype, value)
        self._value = self.ops.from_numpy(np.full(array.shape, value, dtype=dtype), self.device)

    def to(self, device: Any) -> "Element":
        """Move the value to ``device`` (the driver's data device, e.g. ``"cuda:0"``)."""
        self.device = device
        self._value = self.ops.move(self._value, device)
        return self

    def reset(self) -> None:
        """Back to the initial value."""
        self._value = self.ops.from_numpy(self.init_value, self.device)

    def assign(self, value: Any) -> None:
        """``metric.<name> = value``: a number fills the element, a tensor/array/element replaces it."""
        if isinstance(value, (bool, int, float, np.number, np.bool_)):
            self.fill_value(value)
        else:
            self.value = value

    def _as_tensor(self, value: Any) -> Any:
        """``value`` as a tensor of this element's backend, on its device."""
        if isinstance(value, Element):
            value = value.numpy()
        elif self.ops.is_tensor(value):
            return self.ops.move(value, self.device)
        if isinstance(value, (bool, int, float, list, tuple, np.ndarray, np.generic)):
            return self.ops.from_numpy(np.asarray(value), self.device)
        try:
            array = self.ops.to_numpy(value)
        except TypeError:
            raise TypeError(f"Element {self.name!r} cannot hold a {type(value).__name__}: assign a number, a "
                            "numpy array or a tensor.") from None
        return self.ops.from_numpy(array, self.device)

    def _result(self, result: Any) -> Any:
        """A one-value tensor as a python number (as fastNLP's elements give), anything else as is."""
        if self.ops.is_tensor(result) and self.ops.numel(result) == 1:
            return self.ops.to_numpy(result).reshape(()).item()
        return result

    def _operand(self, other: Any) -> Any:
        """``other`` in a form this element's tensor computes with."""
        if isinstance(other, Element):
            other = other._value
        if isinstance(other, (bool, int, float)) or self.ops.is_tensor(other):
            return other
        return self._as_tensor(other)

    # ------------------------------------------------------------------ tensor behaviour
    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):
            raise AttributeError(item)
        try:
            return getattr(self._value, item)
        except AttributeError:
            raise AttributeError(f"Element {self.name!r} (a {type(self._value).__name__}) has no attribute "
                                 f"{item!r}.") from None

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def __len__(self) -> int:
        return len(self._value)

    def __getitem__(self, key: Any) -> Any:
        return self._value[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._value[key] = value._value if isinstance(value, Element) else value

    def __bool__(self) -> bool:
        return bool(self.get_scalar())

    def __float__(self) -> float:
        return float(self.get_scalar())

    def __int__(self) -> int:
        return int(self.get_scalar())

    def __index__(self) -> int:
        return operator.index(self.get_scalar())

    def __neg__(self) -> Any:
        return self._result(-self._value)

    def __pos__(self) -> Any:
        return self._result(+self._value)

    def __abs__(self) -> Any:
        return self._result(abs(self._value))

    def __format__(self, spec: str) -> str:
        if self.ops.numel(self._value) == 1:
            return format(self.get_scalar(), spec)
        return format(str(self), spec)

    def __str__(self) -> str:
        return str(self._value)

    def __repr__(self) -> str:
        return f"Element({self.name}={self._value!r})"


def _binary(op: Callable[[Any, Any], Any], reflected: bool = False) -> Callable[[Element, Any], Any]:
    def method(self: Element, other: Any) -> Any:
        scalar = _one_number(other)
        if scalar is not None and self.ops.numel(self._value) == 1:  # exact python arithmetic, as fastNLP's
            mine = self.get_scalar()
            return op(scalar, mine) if reflected else op(mine, scalar)
        try:
            operand = self._operand(other)
        except TypeError:
            return NotImplemented
        return self._result(op(operand, self._value) if reflected else op(self._value, operand))
    method.__name__ = f"__{'r' if reflected else ''}{op.__name__.strip('_')}__"
    return method


def _one_number(value: Any) -> Any:
    """``value`` as a python number when it is one (or a one-value element), else None."""
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, Element) and value.ops.numel(value._value) == 1:
        return value.get_scalar()
    return None


for _op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
            operator.pow, operator.matmul):
    _name = _op.__name__.strip("_")
    setattr(Element, f"__{_name}__", _binary(_op))
    setattr(Element, f"__r{_name}__", _binary(_op, reflected=True))
for _op in (operator.lt, operator.le, operator.eq, operator.ne, operator.ge, operator.gt):
    setattr(Element, f"__{_op.__name__.strip('_')}__", _binary(_op))
