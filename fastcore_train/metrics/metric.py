"""The ``Metric`` base class: declared state elements plus one cross-rank reduction for every backend.

A metric keeps its running statistics in *elements*: plain attributes (python numbers or numpy
arrays) declared with :meth:`Metric.register_element`. Because each element also records how it
combines over ranks, :meth:`Metric.aggregate` can reduce every metric the same way, whatever
framework the driver runs on; the driver only has to supply an ``all_gather_object`` function.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Sequence

import numpy as np

from fastcore_train.utils.arrays import to_numpy as _to_numpy

__all__ = ["Metric", "AGGREGATE_METHODS"]

#: The reductions an element may declare.
AGGREGATE_METHODS = ("sum", "mean", "max", "min")

_NUMPY_REDUCERS: Dict[str, Callable[..., np.ndarray]] = {
    "sum": np.sum,
    "mean": np.mean,
    "max": np.max,
    "min": np.min,
}


@dataclass(frozen=True)
class _ElementSpec:
    """What ``register_element`` recorded: the initial value and how to reduce over ranks."""

    initial: Any
    aggregate_method: str


class Metric:
    """Base class of all metrics.

    Subclasses declare their state with :meth:`register_element`, accumulate it in
    :meth:`update` with plain attribute arithmetic (``self.correct += n``) and turn it into
    results in :meth:`get_metric`. In distributed evaluation the driver calls
    :meth:`aggregate` once, before :meth:`get_metric`, and :meth:`reset` afterwards.

    :param aggregate_when_get_metric: when ``False``, :meth:`aggregate` does nothing and every
        rank reports the metric of its own shard only.
    """

    #: ``to_numpy`` for subclasses: turns any framework's tensor into a numpy array.
    to_numpy = staticmethod(_to_numpy)

    def __init__(self, aggregate_when_get_metric: bool = True) -> None:
        self.aggregate_when_get_metric = aggregate_when_get_metric
        self._element_specs: Dict[str, _ElementSpec] = {}

    # ----------------------------------------------------------------------------- elements
    def register_element(self, name: str, value: Any = 0, aggregate_method: str = "sum") -> None:
        """Declare the state element ``self.<name>``, starting at a copy of ``value``.

        ``value`` is a python number or a numpy array (lists are turned into arrays);
        ``aggregate_method`` is how :meth:`aggregate` combines the ranks' values: one of
        ``"sum"``, ``"mean"``, ``"max"`` or ``"min"``.
        """
        specs = self.__dict__.get("_element_specs")
        if specs is None:
            raise RuntimeError(
                f"{type(self).__name__}.__init__ must call super().__init__() before register_element()."
            )
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Element name must be a valid python identifier, got {name!r}.")
        if name in specs:
            raise ValueError(f"Element {name!r} is already registered in {type(self).__name__}.")
        if hasattr(self, name):
            raise ValueError(
                f"Element name {name!r} clashes with an existing attribute of {type(self).__name__}."
            )
        if aggregate_method not in AGGREGATE_METHODS:
            raise ValueError(
                f"Unknown aggregate_method {aggregate_method!r} for element {name!r}; "
                f"expected one of {', '.join(AGGREGATE_METHODS)}."
            )
        initial = copy.deepcopy(_as_element_value(name, value))
        specs[name] = _ElementSpec(initial=initial, aggregate_method=aggregate_method)
        setattr(self, name, copy.deepcopy(initial))

    @property
    def elements(self) -> Mapping[str, Any]:
        """Read-only view ``name -> current value`` of every registered element."""
        return MappingProxyType({name: getattr(self, name) for name in self._element_specs})

    def reset(self) -> None:
        """Restore every element to a copy of its initial value (overrides must call super)."""
        for name, spec in self._element_specs.items():
            setattr(self, name, copy.deepcopy(spec.initial))

    # ---------------------------------------------------------------------- subclass contract
    def update(self, *args: Any, **kwargs: Any) -> None:
        """Accumulate the statistics of one batch into the elements."""
        raise NotImplementedError(f"{type(self).__name__} must implement update().")

    def get_metric(self) -> dict:
        """Turn the accumulated elements into a ``{name: value}`` result dict."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_metric().")

    # ------------------------------------------------------------------------- aggregation
    def aggregate(self, all_gather_object: Callable[[Any], List[Any]]) -> None:
        """Replace every element by its reduction over all ranks.

        ``all_gather_object(obj)`` is supplied by the driver; it must return the ``obj`` of every
        rank, in rank order. Elements are reduced in rank order with their declared method and
        written back, so every rank ends up with the global values. Call it once per evaluation
        (a second call would count the data again) and :meth:`reset` afterwards.

        ``"sum"`` elements whose numpy arrays differ in shape between ranks (a growable
        per-class count, say) are right-padded with zeros, sum's identity, to the largest shape;
        other methods require equal shapes. With one rank nothing changes, dtype included.
        Does nothing when ``aggregate_when_get_metric`` is ``False``.
        """
        if not self.aggregate_when_get_metric or not self._element_specs:
            return
        local = {name: getattr(self, name) for name in self._element_specs}
        gathered = all_gather_object(local)
        per_rank = _check_gathered(gathered, list(local), type(self).__name__)
        if len(per_rank) == 1:
            return
        for name, spec in self._element_specs.items():
            values = [rank_values[name] for rank_values in per_rank]
            reduced = _reduce(name, values, spec.aggregate_method, template=local[name])
            setattr(self, name, reduced)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._element_specs)
        return f"{type(self).__name__}({shown})"


# --------------------------------------------------------------------------------- helpers
def _as_element_value(name: str, value: Any) -> Any:
    """Check an initial value is a python number or numpy array (lists become arrays)."""
    if isinstance(value, (list, tuple)):
        return np.asarray(value)
    if isinstance(value, (int, float, np.ndarray, np.generic)):
        return value
    raise TypeError(
        f"Element {name!r} must start as a python number or a numpy array, "
        f"got {type(value).__name__}."
    )


def _check_gathered(gathered: Any, names: Sequence[str], owner: str) -> List[Mapping[str, Any]]:
    """Validate what ``all_gather_object`` returned: one mapping per rank holding every element."""
    if isinstance(gathered, (str, bytes, Mapping)) or not isinstance(gathered, Sequence) or not gathered:
        raise TypeError(
            f"all_gather_object must return a non-empty list with one entry per rank, "
            f"got {type(gathered).__name__}."
        )
    for rank, entry in enumerate(gathered):
        if not isinstance(entry, Mapping):
            raise TypeError(
                f"all_gather_object returned a {type(entry).__name__} for rank {rank}; expected "
                f"the dict of {owner}'s elements."
            )
        missing = [name for name in names if name not in entry]
        if missing:
            raise ValueError(f"Rank {rank} did not send the elements {missing} of {owner}.")
    return list(gathered)


def _reduce(name: str, values: List[Any], method: str, template: Any) -> Any:
    """Reduce one element's per-rank values; the local value's type and dtype are kept."""
    if isinstance(template, (int, float)) and not isinstance(template, bool):
        return _reduce_python(values, method)
    arrays = [np.asarray(value) for value in values]
    if len({array.shape for array in arrays}) > 1:
        arrays = _pad_for_sum(name, arrays, method)
    result = _NUMPY_REDUCERS[method](np.stack(arrays), axis=0)
    template_dtype = np.asarray(template).dtype
    if method != "mean":
        result = result.astype(template_dtype, copy=False)
    if isinstance(template, np.generic):
        return result[()]
    return np.asarray(result)


def _reduce_python(values: List[Any], method: str) -> Any:
    """Reduce python numbers; integer sums, maxima and minima stay python ints."""
    if method == "sum":
        result = sum(values)
    elif method == "max":
        result = max(values)
    elif method == "min":
        result = min(values)
    else:
        return float(sum(values)) / len(values)
    if all(isinstance(value, (int, np.integer)) for value in values):
        return int(result)
    return float(result)


def _pad_for_sum(name: str, arrays: List[np.ndarray], method: str) -> List[np.ndarray]:
    """Right-pad arrays with zeros to a common shape; only sound for ``"sum"``."""
    ndims = {array.ndim for array in arrays}
    if method != "sum" or len(ndims) != 1:
        shapes = [array.shape for array in arrays]
        raise ValueError(
            f"Element {name!r} has different shapes on different ranks ({shapes}); only 'sum' "
            "elements with the same number of dimensions can be padded to a common shape."
        )
    target = tuple(max(sizes) for sizes in zip(*(array.shape for array in arrays)))
    return [
        np.pad(array, [(0, full - size) for size, full in zip(array.shape, target)])
        for array in arrays
    ]
