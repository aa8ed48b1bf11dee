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


def get_monitor_value(results: Mapping[str, Any], monitor: Monitor) -> Optional[float]:
    """The monitored number, or None when ``results`` holds nothing matching ``monitor``."""
    if monitor is None or not results:
        return None
    if callable(monitor):
        return float(monitor(results))
    key = resolve_monitor_key(results, monitor)
    return None if key is None else float(results[key])


def is_better(value: float, best: Optional[float], larger_better: bool) -> bool:
    if best is None:
        return True
    return value > best if larger_better else value < best
