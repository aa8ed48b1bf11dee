"""The ``Metric`` base class: declared state elements plus one cross-rank reduction for every backend.

A metric keeps its running statistics in *elements* (:class:`~fastcore_train.metrics.element.Element`),
declared with :meth:`Metric.register_element`: each holds a tensor of the metric's backend (numpy,
or the framework's tensor) and records how it combines over ranks. ``get_metric()`` reduces them
over the ranks that each evaluated part of the data (gathered through the driver, or through the
framework's own process group when the metric is used alone), computes the result and puts the
local values back, so the reduction is written once here for every backend and framework.

The API is fastNLP 1.0's: ``Metric(backend=, aggregate_when_get_metric=)``,
``register_element(name, value, aggregate_method, backend)``, elements that behave like tensors,
``self.all_gather_object(obj)``, ``sync()``, ``to(device)``, ``tensor2numpy``.
"""
from __future__ import annotations

import contextlib
import functools
from types import MappingProxyType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

import numpy as np

from fastcore_train.log import logger
from fastcore_train.metrics._reduce import AGGREGATE_METHODS, check_aggregate_method, reduce_gathered
from fastcore_train.metrics.element import Element
from fastcore_train.metrics.element_ops import (ElementOps, Gather, check_backend_name, element_ops,
                                                ops_for_values)
from fastcore_train.utils.arrays import to_numpy as _to_numpy

__all__ = ["Metric", "AGGREGATE_METHODS"]

_UNSET = object()
_WARNED_UNGATHERED: set = set()  # metric classes already warned about (once each)


class ElementNameError(ValueError, RuntimeError):
    """An element name that cannot be used (a ValueError; a RuntimeError as in fastNLP)."""


class Metric:
    """Base class of all metrics.

    Subclasses declare their state with :meth:`register_element`, accumulate it in
    :meth:`update` with plain attribute arithmetic (``self.correct += n``) and turn it into
    results in :meth:`get_metric`. The Evaluator calls :meth:`reset` before each dataloader.

    :param backend: the tensors the elements hold: ``"auto"`` (the Evaluator's driver's
        framework, or else that of the tensors first given to :meth:`update`), ``"numpy"``
        (or None), or a backend name (``"torch"``, ``"paddle"``, ``"jittor"``, ``"oneflow"``).
    :param aggregate_when_get_metric: whether :meth:`get_metric` reduces the elements over ranks.
        None (default): the Evaluator decides (yes when each rank evaluated a share of the data);
        used alone, no. True: also when used alone in a framework process group. False: never;
        every rank reports the metric of its own share.
    """

    #: ``to_numpy`` for subclasses: turns any framework's tensor into a numpy array.
    to_numpy = staticmethod(_to_numpy)

    def __init__(self, backend: Optional[str] = "auto", aggregate_when_get_metric: Optional[bool] = None) -> None:
        if isinstance(backend, bool):
            raise TypeError("Metric's first argument is backend; pass aggregate_when_get_metric=... by keyword.")
        name = check_backend_name(backend)
        state = self.__dict__
        state["_elements"] = {}
        state["_ops"] = None if name == "auto" else element_ops(name)
        state["_device"] = None
        state["_evaluator_gather"] = _UNSET
        state["_in_get_metric"] = False
        state["_gather_called"] = False
        self.aggregate_when_get_metric = aggregate_when_get_metric

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wrap a subclass's ``update``, ``get_metric`` and ``reset`` (as fastNLP does): the backend
        is resolved on the first update, get_metric reduces over ranks, reset restores elements."""
        super().__init_subclass__(**kwargs)
        for name, wrapper in (("update", _wrap_update), ("get_metric", _wrap_get_metric), ("reset", _wrap_reset)):
            if name in cls.__dict__ and not getattr(cls.__dict__[name], "_fastcore_wrapped", False):
                setattr(cls, name, wrapper(cls.__dict__[name]))

    # ----------------------------------------------------------------------------- elements
    def register_element(self, name: str, value: Any = 0, aggregate_method: Optional[str] = "sum",
                         backend: Optional[str] = "auto") -> Element:
        """Declare the element ``self.<name>``, starting at ``value`` (a number, list or numpy array).

        ``aggregate_method`` is how the ranks' values combine: ``"sum"``, ``"mean"``, ``"max"``,
        ``"min"``, or None (not combined; an error when ranks evaluated shares of the data).
        ``backend``: ``"auto"`` follows the metric's backend; a name fixes this element's.
        """
        elements = self.__dict__.get("_elements")
        if elements is None:
            raise RuntimeError(
                f"{type(self).__name__}.__init__ must call super().__init__() before register_element()."
            )
        if not isinstance(name, str) or not name.isidentifier():
            raise ElementNameError(f"Element name must be a valid python identifier, got {name!r}.")
        if name in elements:
            raise ElementNameError(f"Element {name!r} is already registered in {type(self).__name__}.")
        if hasattr(self, name):
            raise ElementNameError(
                f"Element name {name!r} clashes with an existing attribute of {type(self).__name__}."
            )
        check_aggregate_method(name, aggregate_method)
        backend = check_backend_name(backend)
        if isinstance(value, (list, tuple)):
            value = np.asarray(value)
        elif not isinstance(value, (bool, int, float, np.ndarray, np.generic)):
            raise TypeError(f"Element {name!r} must start as a python number or a numpy array, "
                            f"got {type(value).__name__}.")
        ops = self._ops if backend == "auto" else element_ops(backend)
        element = Element(name, value, aggregate_method, ops, device=self._device)
        element.fixed_backend = backend != "auto"
        elements[name] = element
        return element

    @property
    def elements(self) -> Mapping[str, Element]:
        """Read-only view ``name -> Element`` of every registered element."""
        return MappingProxyType(self.__dict__.get("_elements", {}))

    def __getattr__(self, name: str) -> Any:
        elements = self.__dict__.get("_elements")
        if elements is not None and name in elements:
            return elements[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        elements = self.__dict__.get("_elements")
        if elements is not None and name in elements:
            if value is not elements[name]:
                elements[name].assign(value)
            return
        if isinstance(value, Element):
            raise RuntimeError(f"Use register_element() to add the element {name!r}.")
        object.__setattr__(self, name, value)

    def reset(self) -> None:
        """Restore every element to its initial value. A subclass's override is wrapped so that its
        elements are restored too, whether or not it calls ``super().reset()``."""
        for element in self.__dict__.get("_elements", {}).values():
            element.reset()

    # ----------------------------------------------------------------------------- backend
    @property
    def backend(self) -> str:
        """The elements' backend name; ``"auto"`` until it is known."""
        ops = self.__dict__.get("_ops")
        return "auto" if ops is None else ops.name

    def use_backend(self, backend: str) -> None:
        """Give a ``backend="auto"`` metric its backend (the Evaluator passes its driver's); a metric
        whose backend is already known keeps it."""
        if self.__dict__.get("_ops") is None:
            self._bind(element_ops(check_backend_name(backend)))

    def _bind(self, ops: ElementOps) -> None:
        self.__dict__["_ops"] = ops
        for element in self._elements.values():
            if not element.fixed_backend:
                element.bind(ops, self._device)

    def to(self, device: Any) -> "Metric":
        """Move every element to ``device`` (elements of a backend resolved later start there)."""
        self.__dict__["_device"] = device
        for element in self._elements.values():
            element.to(device)
        return self

    def tensor2numpy(self, tensor: Any) -> np.ndarray:
        """fastNLP's name of :meth:`to_numpy`."""
        return self.to_numpy(tensor)

    def set_auto_aggregate_when_get_metric(self, flag: Optional[bool]) -> None:
        self.aggregate_when_get_metric = flag

    # ---------------------------------------------------------------------- subclass contract
    def update(self, *args: Any, **kwargs: Any) -> None:
        """Accumulate the statistics of one batch into the elements."""
        raise NotImplementedError(f"{type(self).__name__} must implement update().")

    def get_metric(self) -> dict:
        """Turn the accumulated elements into a ``{name: value}`` result dict."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_metric().")

    # ------------------------------------------------------------------------- aggregation
    @contextlib.contextmanager
    def gather_with(self, all_gather_object: Optional[Gather]) -> Iterator[None]:
        """Within it, :meth:`get_metric` and :meth:`all_gather_object` gather with
        ``all_gather_object`` (the Evaluator passes its driver's when each rank evaluated a share of
        the data, None when every rank saw all of it: then nothing is gathered)."""
        previous = self.__dict__["_evaluator_gather"]
        self.__dict__["_evaluator_gather"] = all_gather_object
        try:
            yield
        finally:
            self.__dict__["_evaluator_gather"] = previous

    def _gather(self, asked: bool = False) -> Optional[Gather]:
        """How to gather now: the Evaluator's choice, else (when ``aggregate_when_get_metric`` is
        True, or ``asked``) the framework's own process group; None: nothing to gather."""
        if self.aggregate_when_get_metric is False:
            return None
        chosen = self.__dict__.get("_evaluator_gather", _UNSET)
        if chosen is not _UNSET:
            return chosen
        ops = self.__dict__.get("_ops")
        if (self.aggregate_when_get_metric or asked) and ops is not None:
            return ops.process_group_gather()
        return None

    def all_gather_object(self, obj: Any, group: Any = None) -> List[Any]:
        """Every rank's ``obj``, in rank order (``[obj]`` when nothing is gathered): for a
        ``get_metric`` that combines ranks by itself."""
        self.__dict__["_gather_called"] = True
        gather = self._gather()
        return [obj] if gather is None else list(gather(obj))

    def aggregate(self, all_gather_object: Optional[Gather] = None) -> None:
        """Replace every element by its reduction over all ranks, kept until :meth:`reset`.

        ``all_gather_object(obj)`` must return every rank's ``obj`` in rank order (default: as
        :meth:`get_metric` would gather). Elements are gathered as numpy, reduced in rank order with
        their method and written back as tensors of their backend. ``"sum"`` arrays whose shapes
        differ between ranks are right-padded with zeros; other methods need equal shapes. With one
        rank nothing changes. Does nothing when ``aggregate_when_get_metric`` is False.
        """
        if self.aggregate_when_get_metric is False or not self._elements:
            return
        gather = all_gather_object if all_gather_object is not None else self._gather(asked=True)
        if gather is None:
            return
        local = {name: element.numpy() for name, element in self._elements.items()}
        methods = {name: element.aggregate_method for name, element in self._elements.items()}
        reduced = reduce_gathered(gather(local), local, methods, type(self).__name__)
        for name, value in (reduced or {}).items():
            self._elements[name].value = value

    @contextlib.contextmanager
    def sync(self, recover: bool = True, aggregate: bool = False,
             all_gather_object: Optional[Gather] = None) -> Iterator[None]:
        """Within it the elements hold their reduction over ranks (when ``aggregate``); with
        ``recover`` their local values come back afterwards (fastNLP's ``sync``)."""
        kept: Dict[str, Any] = {}
        if aggregate:
            kept = {name: element.value for name, element in self._elements.items()}
            self.aggregate(all_gather_object)
        try:
            yield
        finally:
            if recover:
                for name, value in kept.items():
                    self._elements[name].value = value

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={element}" for name, element in self.__dict__.get("_elements", {}).items())
        return f"{type(self).__name__}({shown})"


# ----------------------------------------------------------------------- subclass wrappers
def _marked(wrapper: Callable, fn: Callable) -> Callable:
    functools.update_wrapper(wrapper, fn)
    wrapper._fastcore_wrapped = True  # type: ignore[attr-defined]
    return wrapper


def _check_initialised(metric: Metric) -> None:
    if "_elements" not in metric.__dict__:
        raise RuntimeError(f"{type(metric).__name__}.__init__ must call super().__init__().")


def _wrap_update(update: Callable) -> Callable:
    def wrapper(self: Metric, *args: Any, **kwargs: Any) -> Any:
        _check_initialised(self)
        if self.__dict__["_ops"] is None:
            self._bind(ops_for_values([*args, *kwargs.values()]))
        return update(self, *args, **kwargs)
    return _marked(wrapper, update)


def _wrap_get_metric(get_metric: Callable) -> Callable:
    def wrapper(self: Metric, *args: Any, **kwargs: Any) -> Any:
        _check_initialised(self)
        state = self.__dict__
        if state["_in_get_metric"]:  # a subclass calling super().get_metric(): already reduced
            return get_metric(self, *args, **kwargs)
        state["_in_get_metric"], state["_gather_called"] = True, False
        try:
            gather = self._gather()
            with self.sync(recover=True, aggregate=gather is not None, all_gather_object=gather):
                result = get_metric(self, *args, **kwargs)
            if (gather is not None and not state["_elements"] and not state["_gather_called"]
                    and type(self) not in _WARNED_UNGATHERED):
                _WARNED_UNGATHERED.add(type(self))
                logger.warning("%s registers no element and its get_metric() calls no self.all_gather_object(): its "
                               "result covers this rank's share of the data only.", type(self).__name__)
            return result
        finally:
            state["_in_get_metric"] = False
    return _marked(wrapper, get_metric)


def _wrap_reset(reset: Callable) -> Callable:
    def wrapper(self: Metric, *args: Any, **kwargs: Any) -> Any:
        _check_initialised(self)
        Metric.reset(self)
        return reset(self, *args, **kwargs)
    return _marked(wrapper, reset)
