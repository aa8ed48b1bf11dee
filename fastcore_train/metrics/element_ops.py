"""What a metric element needs from a framework, and where it comes from.

An element's value is a tensor of its backend: a numpy array for ``"numpy"`` (written here), or a
framework tensor whose calls come from that backend's ``metrics`` module
(``fastcore_train/backends/<name>/metrics.py``, the same module name in every backend), reached
through the registry so that the core never imports a framework. A backend's ``metrics`` module
defines ``is_tensor``, ``from_numpy``, ``move``, ``numel`` and ``process_group_gather`` (see
:class:`ElementOps`) and, when its framework has a metric library, ``adapt``.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterable, Optional

import numpy as np

from fastcore_train.drivers.registry import (BackendEntry, all_backends, backend_for_value, find_backend_part,
                                             get_backend)
from fastcore_train.utils.arrays import to_numpy

__all__ = ["ElementOps", "NUMPY_OPS", "element_ops", "ops_for_values", "check_backend_name", "Gather"]

#: ``all_gather_object``: every rank's object, in rank order.
Gather = Callable[[Any], list]
METRICS_PART = "metrics"
_PART_FUNCTIONS = ("is_tensor", "from_numpy", "move", "numel", "process_group_gather")


class ElementOps:
    """The calls an element makes on its values, for one backend.

    ``name``: the backend (``"numpy"`` or a registered backend); ``module``: the backend's
    ``metrics`` module supplying ``is_tensor(value)``, ``from_numpy(array, device)``,
    ``move(value, device)``, ``numel(value)`` and ``process_group_gather()`` (the framework's own
    ``all_gather_object`` when its process group has several ranks, else None); None for numpy.
    """

    def __init__(self, name: str, module: Optional[ModuleType] = None) -> None:
        self.name = name
        self.module = module

    def is_tensor(self, value: Any) -> bool:
        if self.module is None:
            return isinstance(value, (np.ndarray, np.generic))
        return bool(self.module.is_tensor(value))

    def from_numpy(self, array: np.ndarray, device: Any = None) -> Any:
        if self.module is None:
            return np.array(array, copy=True)
        return self.module.from_numpy(np.array(array, order="C"), device)

    @staticmethod
    def to_numpy(value: Any) -> np.ndarray:
        return np.asarray(to_numpy(value))

    def move(self, value: Any, device: Any) -> Any:
        return value if self.module is None or device is None else self.module.move(value, device)

    def numel(self, value: Any) -> int:
        return int(np.size(value)) if self.module is None else int(self.module.numel(value))

    def process_group_gather(self) -> Optional[Gather]:
        return None if self.module is None else self.module.process_group_gather()

    def __repr__(self) -> str:
        return f"ElementOps({self.name!r})"


NUMPY_OPS = ElementOps("numpy")
_CACHE: dict[str, ElementOps] = {}


def _ops_of(entry: BackendEntry) -> ElementOps:
    """The ops of a registered backend; a backend without a ``metrics`` module keeps numpy values."""
    if entry.name not in _CACHE:
        module = find_backend_part(entry, METRICS_PART)
        if module is None:
            return NUMPY_OPS
        missing = [name for name in _PART_FUNCTIONS if not callable(getattr(module, name, None))]
        if missing:
            raise TypeError(f"Backend {entry.name!r}: {module.__name__} lacks {', '.join(missing)}.")
        _CACHE[entry.name] = ElementOps(entry.name, module)
    return _CACHE[entry.name]


def check_backend_name(backend: Any) -> str:
    """``backend=`` of a metric or element: ``"auto"``, ``"numpy"`` (or None), or a registered backend."""
    if backend is None:
        return "numpy"
    names = ["auto", "numpy"] + [entry.name for entry in all_backends()]
    if not isinstance(backend, str) or backend not in names:
        raise ValueError(f"backend={backend!r} is not a metric backend; use one of {', '.join(map(repr, names))} "
                         "('auto' follows the Evaluator's driver, or the tensors given to update()).")
    return backend


def element_ops(backend: str) -> ElementOps:
    """The ops of ``backend`` (a name :func:`check_backend_name` accepts, other than ``"auto"``)."""
    if backend == "numpy":
        return NUMPY_OPS
    return _ops_of(get_backend(backend))


def ops_for_values(values: Iterable[Any]) -> ElementOps:
    """The ops of the one framework the tensors among ``values`` belong to (told from their class
    modules); numpy when there is none. Tensors of two frameworks are an error."""
    found: dict[str, BackendEntry] = {}
    for value in values:
        entry = backend_for_value(value)
        if entry is not None:
            found[entry.name] = entry
    if len(found) > 1:
        raise RuntimeError(f"update() got tensors of {' and '.join(sorted(found))}; a metric with backend='auto' "
                           "needs one framework. Pass backend='<name>' to the metric.")
    return _ops_of(next(iter(found.values()))) if found else NUMPY_OPS
