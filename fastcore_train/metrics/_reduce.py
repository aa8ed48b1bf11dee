"""The one cross-rank reduction of metric elements: numpy values gathered in rank order, reduced
with each element's declared method. Every backend's elements go through it (as numpy)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

__all__ = ["AGGREGATE_METHODS", "check_aggregate_method", "reduce_gathered"]

#: The reductions an element may declare (None: the element is not reduced).
AGGREGATE_METHODS = ("sum", "mean", "max", "min")

_NUMPY_REDUCERS: Dict[str, Callable[..., np.ndarray]] = {
    "sum": np.sum,
    "mean": np.mean,
    "max": np.max,
    "min": np.min,
}


def check_aggregate_method(name: str, method: Optional[str]) -> Optional[str]:
    if method is not None and method not in AGGREGATE_METHODS:
        raise ValueError(
            f"Unknown aggregate_method {method!r} for element {name!r}; "
            f"expected one of {', '.join(AGGREGATE_METHODS)} (or None: not reduced across ranks)."
        )
    return method


def reduce_gathered(gathered: Any, local: Mapping[str, np.ndarray], methods: Mapping[str, Optional[str]],
                    owner: str) -> Optional[Dict[str, np.ndarray]]:
    """The reduced value of every element, from what ``all_gather_object(local)`` returned;
    None with one rank (nothing to reduce)."""
    per_rank = _check_gathered(gathered, list(local), owner)
    if len(per_rank) == 1:
        return None
    unreduced = [name for name, method in methods.items() if method is None]
    if unreduced:
        raise RuntimeError(
            f"{owner}'s elements {unreduced} have no aggregate_method, but {len(per_rank)} ranks each evaluated "
            "part of the data. Declare how to combine them: register_element(name, value, "
            "aggregate_method='sum' | 'mean' | 'max' | 'min').")
    return {name: _reduce(name, [np.asarray(values[name]) for values in per_rank], methods[name], local[name])
            for name in local}


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


def _reduce(name: str, arrays: List[np.ndarray], method: str, template: np.ndarray) -> np.ndarray:
    """Reduce one element's per-rank arrays; the local dtype is kept (except for a mean)."""
    if len({array.shape for array in arrays}) > 1:
        arrays = _pad_for_sum(name, arrays, method)
    result = _NUMPY_REDUCERS[method](np.stack(arrays), axis=0)
    if method != "mean":
        result = result.astype(np.asarray(template).dtype, copy=False)
    return np.asarray(result)


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
