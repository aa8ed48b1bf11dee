"""Shared by callbacks that watch a monitored evaluation result."""
from __future__ import annotations

import math
from typing import Any, Optional

from fastcore_train.controllers.monitor import Monitor, get_monitor_value, is_better, resolve_monitor_key
from fastcore_train.log import logger


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
        self._warned_non_finite = False  # a NaN/inf value is said once per tracker, not at every evaluation

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

    def value(self, results: dict[str, Any], trainer: Any = None) -> Optional[float]:
        """The monitored value in ``results``; None when the result it reads had no data this time,
        or is NaN or infinite (never "better" than a measured value: no top-k checkpoint, no best
        model, no early-stop count from it; a warning says so once, naming the evaluation).

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
        if value is not None and not math.isfinite(value):
            self._warn_non_finite(results, value, trainer)
            return None
        return value

    def _warn_non_finite(self, results: dict[str, Any], value: float, trainer: Any) -> None:
        if self._warned_non_finite:
            return
        self._warned_non_finite = True
        where = ""
        if trainer is not None:
            from fastcore_train.callbacks.metric_log import current_epoch
            where = (f" at the evaluation after batch {trainer.global_forward_batches} "
                     f"(epoch {current_epoch(trainer)})")
        logger.warning(
            "%s: monitor %s is %s%s. A NaN or infinite value is never better than a measured one, so it is "
            "ignored: no top-k checkpoint, best model or early-stop count comes from it. Check the metric and the "
            "model's outputs (NaN weights after a diverged step give NaN metrics). Later non-finite values of "
            "this monitor are ignored without another warning.",
            self.owner, self._label(results), value, where)

    def _label(self, results: dict[str, Any]) -> str:
        """The monitor as written, and the result name it read when that differs."""
        key = self.key(results)
        return repr(key) if key == self.monitor or callable(self.monitor) else f"{self.monitor!r} ({key})"

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
