"""``WarmupCallback``: warm the learning rate up, then hold it or decay it linearly, on any backend.

The schedule is fastNLP 1.0's ``TorchWarmupCallback``, written once for every framework: before
each optimizer step every parameter group's rate is its initial rate times a factor of the run's
progress (the fraction of its batches done). The rates are read and set through the backend's
``lr`` module, so the callback itself imports no framework. ``TorchWarmupCallback``,
``PaddleWarmupCallback``, ``JittorWarmupCallback`` and ``OneflowWarmupCallback`` are the same
class under the names fastNLP code may use.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Union

from fastcore_train.drivers.registry import backend_part
from fastcore_train.events.callback import Callback

SCHEDULES = ("linear", "constant")


class WarmupCallback(Callback):
    """Scale each parameter group's learning rate by a warmup schedule before every optimizer step.

    ``warmup``: the warmup length, a number of batches (an int > 1) or a fraction of the run's
    batches (a float, e.g. 0.1 for the first 10%). ``schedule``: ``"linear"`` rises linearly to
    the optimizer's rate during the warmup, then falls linearly to 0 at the end of the run;
    ``"constant"`` rises the same way, then stays at the optimizer's rate. Progress counts batches
    (``trainer.global_forward_batches``), so with gradient accumulation the factor advances by
    ``accumulation_steps`` per step. The initial rates are part of checkpoints, so a resumed run
    continues the schedule exactly. The run's length must be known: a sized dataloader or
    ``n_batches=``.
    """

    def __init__(self, warmup: Union[int, float] = 0.1, schedule: str = "linear") -> None:
        if isinstance(warmup, bool) or not isinstance(warmup, numbers.Real) or math.isnan(warmup):
            raise ValueError(f"warmup must be a number of batches (int) or a fraction of the run (float), got {warmup!r}.")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}.")
        self.warmup = max(float(warmup), 0.0)
        self.schedule = schedule
        self.initial_lrs: Optional[list[list[float]]] = None  # per optimizer, per parameter group
        self._fraction = 0.0
        self._total = 2
        self._lr: Any = None

    @property
    def callback_name(self) -> str:
        return f"WarmupCallback#{self.schedule}"

    def factor(self, progress: float) -> float:
        """The multiplier of the initial rates at ``progress`` (the fraction of the run done)."""
        if progress < self._fraction:
            return progress / self._fraction
        if self.schedule == "constant":
            return 1.0
        return max((progress - 1.0) / (self._fraction - 1.0), 0.0) if self._fraction != 1.0 else 0.0

    def on_train_begin(self, trainer: Any) -> None:
        total = trainer.n_batches
        if total is None or total <= 0:
            raise ValueError("WarmupCallback needs the run's number of batches: pass a dataloader with a length, "
                             "or n_batches= to the Trainer.")
        self._fraction = self.warmup / total if self.warmup > 1 else self.warmup
        steps = trainer.accumulation_steps
        self._total = math.ceil(max(2, total) / steps) * steps
        self._lr = backend_part(trainer.model, "lr")
        if self.initial_lrs is None:
            self.initial_lrs = [self._lr.learning_rates(optimizer) for optimizer in trainer.driver.optimizers]

    def on_before_optimizers_step(self, trainer: Any, optimizers: list) -> None:
        progress = (trainer.global_forward_batches + trainer.accumulation_steps) / self._total
        factor = self.factor(progress)
        for optimizer, initial in zip(trainer.driver.optimizers, self.initial_lrs or []):
            self._lr.set_learning_rates(optimizer, [rate * factor for rate in initial])

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {"initial_lrs": self.initial_lrs}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        if states and states.get("initial_lrs") is not None:
            self.initial_lrs = [list(rates) for rates in states["initial_lrs"]]


#: fastNLP 1.0's name (torch only there); the same framework-neutral callback.
TorchWarmupCallback = WarmupCallback
PaddleWarmupCallback = WarmupCallback
JittorWarmupCallback = WarmupCallback
OneflowWarmupCallback = WarmupCallback
