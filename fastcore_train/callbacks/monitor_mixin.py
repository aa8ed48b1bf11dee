"""Shared by callbacks that watch a monitored evaluation result."""
from __future__ import annotations

from typing import Any, Optional

from fastcore_train.controllers.monitor import Monitor, get_monitor_value, is_better, resolve_monitor_key


class MonitorNotFoundError(ValueError):
    """A monitor that names no evaluation result."""


class MonitorTracker:
    """Reads the monitored value from results and remembers the best one seen.

    ``monitor=None`` and ``larger_better=None`` fall back to the Trainer's own settings.
    """

    def __init__(self, monitor: Monitor = None, larger_better: Optional[bool] = None) -> None:
        self.monitor = monitor
        self.larger_better = larger_better
        self.best: Optional[float] = None
        self.owner = "The monitor"

    def bind(self, trainer: Any, owner: str) -> None:
        self.owner = owner
        if self.monitor is None:
            self.monitor = trainer.monitor
            if self.larger_better is None:
                self.larger_better = trainer.larger_better
        if self.larger_better is None:
            self.larger_better = True
        if self.monitor is None:
            raise ValueError(f"{owner} needs a monitor: pass monitor= to it or to the Trainer.")

    def value(self, results: dict[str, Any]) -> Optional[float]:
        """The monitored value in ``results``; None when the result it reads had no data this time.

        A named monitor that matches none of the results, when every dataloader gave results,
        can never match: that is an error naming the results there are, not a silent "no value".
        """
        value = get_monitor_value(results, self.monitor)
        if value is None and isinstance(self.monitor, str) and not getattr(results, "no_data", ()):
            raise MonitorNotFoundError(
                f"{self.owner}: monitor {self.monitor!r} matches none of the evaluation results "
                f"{sorted(results)}, so it would never give a value to act on. A monitor is a result name, "
                "whole or its leading '#'-separated parts (e.g. 'acc' matches 'acc#acc#dev'); pass one of "
                "these names instead, or a callable(results) -> float.")
        return value

    def key(self, results: dict[str, Any]) -> str:
        if callable(self.monitor):
            return getattr(self.monitor, "__name__", "monitor")
        return resolve_monitor_key(results, self.monitor) or str(self.monitor)

    def update(self, value: float) -> bool:
        """Record ``value``; True when it beats the best so far."""
        if is_better(value, self.best, self.larger_better):
            self.best = value
            return True
        return False
