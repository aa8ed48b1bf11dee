"""Finding the value a ``monitor`` names in flattened evaluation results."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Union

Monitor = Union[str, Callable[[Mapping[str, Any]], float], None]


def resolve_monitor_key(results: Mapping[str, Any], monitor: str) -> Optional[str]:
    """The results key ``monitor`` refers to.

    Keys look like ``indicator#metric#dataloader``. An exact key wins; otherwise a key whose
    leading ``#``-separated parts equal ``monitor``'s parts (``"acc"`` matches ``"acc#acc#dev"``).
    Among several candidates the first in result order is used.
    """
    if monitor in results:
        return monitor
    wanted = monitor.split("#")
    for key in results:
        if key.split("#")[: len(wanted)] == wanted:
            return key
    return None


class MonitorValueError(TypeError):
    """A monitored result that is not one number (a list, an array of several values, a string)."""


def _one_number(value: Any, source: str) -> float:
    """``value`` as a float when it is one number (a python or numpy scalar, a one-element array
    is not); else :class:`MonitorValueError` saying what ``source`` returned and what is expected."""
    if not isinstance(value, (str, bytes, list, tuple, dict)) and getattr(value, "ndim", 0) == 0:
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    shape = getattr(value, "shape", None)
    kind = f"{type(value).__name__}{' of shape ' + str(tuple(shape)) if shape is not None else ''}"
    raise MonitorValueError(
        f"{source} is {shown}, a {kind}, not one number: a monitor (top-k checkpoints, early stopping, the best "
        "model) compares one number per evaluation. Return one number under that name from the metric (e.g. the "
        "mean of the per-class values, and the list under another name), or monitor another result.")


def get_monitor_value(results: Mapping[str, Any], monitor: Monitor) -> Optional[float]:
    """The monitored number, or None when ``results`` holds nothing matching ``monitor``; a value
    that is not one number is :class:`MonitorValueError` naming the result (the metric's key)."""
    if monitor is None or not results:
        return None
    if callable(monitor):
        name = getattr(monitor, "__qualname__", type(monitor).__name__)
        return _one_number(monitor(results), f"The monitor function {name} returned a value that")
    key = resolve_monitor_key(results, monitor)
    if key is None:
        return None
    metric = key.split("#")
    where = f" (key {metric[0]!r} of metric {metric[1]!r})" if len(metric) > 1 else ""
    return _one_number(results[key], f"The monitored result {key!r}{where}, matched by monitor {monitor!r},")


def is_better(value: float, best: Optional[float], larger_better: bool) -> bool:
    if best is None:
        return True
    return value > best if larger_better else value < best
