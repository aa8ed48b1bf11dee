"""``EarlyStopCallback``: stop training after ``patience`` evaluations without improvement."""
from __future__ import annotations

from typing import Any, Optional

from fastcore_train.callbacks.monitor_mixin import MonitorTracker
from fastcore_train.controllers.monitor import Monitor
from fastcore_train.events.callback import Callback
from fastcore_train.log import logger


class EarlyStopCallback(Callback):
    """Stop training once ``patience`` evaluations in a row have not improved ``monitor``.

    ``monitor``/``larger_better`` default to the Trainer's. Every rank sees the same evaluation
    results, so every rank stops at the same batch; the count survives a resume.
    """

    def __init__(self, monitor: Monitor = None, larger_better: Optional[bool] = None, patience: int = 10) -> None:
        if not isinstance(patience, int) or isinstance(patience, bool) or patience <= 0:
            raise ValueError(f"patience must be a positive int, got {patience!r}.")
        self.tracker = MonitorTracker(monitor, larger_better)
        self.patience = patience
        self.wait = 0

    def on_after_trainer_initialized(self, trainer: Any, driver: Any) -> None:
        self.tracker.bind(trainer, "EarlyStopCallback")

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        value = self.tracker.value(results, trainer)
        if value is None:
            return
        if self.tracker.update(value):
            self.wait = 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            logger.info("Early stopping: %s did not improve on %.6g for %d evaluations.",
                        self.tracker.monitor, self.tracker.best, self.patience)
            trainer.stop_training()

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {"wait": self.wait, "best": self.tracker.best}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        if states:
            self.wait = states["wait"]
            self.tracker.best = states["best"]
