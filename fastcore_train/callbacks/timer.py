"""``TimerCallback``: where training time goes, per phase (fetching data, forward, backward, ...)."""
from __future__ import annotations

import time
from typing import Any

from fastcore_train.events.callback import Callback
from fastcore_train.log import logger

PHASES = ("fetch data", "forward", "backward", "optimizer step", "zero grad", "train batch", "evaluate")


class PhaseTimer:
    """Total seconds and count of one phase."""

    __slots__ = ("total", "count", "_started")

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0
        self._started = 0.0

    def start(self) -> None:
        self._started = time.perf_counter()

    def stop(self) -> None:
        self.total += time.perf_counter() - self._started
        self.count += 1


class TimerCallback(Callback):
    """Time each phase of training and report the totals (rank 0, via the package logger).

    ``print_every``: > 0 reports every that many batches, < 0 every that many epochs, 0 only
    when training ends (it always reports then). Forward is timed from the batch's start to its
    backward; on a GPU the framework runs asynchronously, so a phase's time can show up in the
    next phase that waits for the device. The figures are in ``timers`` too.
    """

    def __init__(self, print_every: int = -1, time_ndigit: int = 3) -> None:
        if isinstance(print_every, bool) or not isinstance(print_every, int):
            raise ValueError(f"print_every must be an int (>0 batches, <0 epochs, 0 only at the end), got {print_every!r}.")
        self.print_every = print_every
        self.time_ndigit = time_ndigit
        self.timers: dict[str, PhaseTimer] = {phase: PhaseTimer() for phase in PHASES}
        self._reports = False

    def on_after_trainer_initialized(self, trainer: Any, driver: Any) -> None:
        self._reports = driver.comm.is_global_zero()

    def on_fetch_data_begin(self, trainer: Any) -> None:
        self.timers["fetch data"].start()

    def on_fetch_data_end(self, trainer: Any) -> None:
        self.timers["fetch data"].stop()

    def on_train_batch_begin(self, trainer: Any, batch: Any, indices: Any) -> None:
        self.timers["train batch"].start()
        self.timers["forward"].start()

    def on_before_backward(self, trainer: Any, outputs: Any) -> None:
        self.timers["forward"].stop()
        self.timers["backward"].start()

    def on_after_backward(self, trainer: Any) -> None:
        self.timers["backward"].stop()

    def on_before_optimizers_step(self, trainer: Any, optimizers: list) -> None:
        self.timers["optimizer step"].start()

    def on_after_optimizers_step(self, trainer: Any, optimizers: list) -> None:
        self.timers["optimizer step"].stop()

    def on_before_zero_grad(self, trainer: Any, optimizers: list) -> None:
        self.timers["zero grad"].start()

    def on_after_zero_grad(self, trainer: Any, optimizers: list) -> None:
        self.timers["zero grad"].stop()

    def on_train_batch_end(self, trainer: Any) -> None:
        self.timers["train batch"].stop()
        if self.print_every > 0 and trainer.global_forward_batches % self.print_every == 0:
            self.report(f"after {trainer.global_forward_batches} batches")

    def on_evaluate_begin(self, trainer: Any) -> None:
        self.timers["evaluate"].start()

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        self.timers["evaluate"].stop()

    def on_train_epoch_end(self, trainer: Any) -> None:
        if self.print_every < 0 and trainer.cur_epoch_idx % -self.print_every == 0:
            self.report(f"after epoch {trainer.cur_epoch_idx}")

    def on_train_end(self, trainer: Any) -> None:
        self.report("training finished")

    def summary(self) -> dict[str, dict[str, float]]:
        """``{phase: {"total": seconds, "count": n, "mean": seconds}}`` for the phases that ran."""
        return {phase: {"total": timer.total, "count": timer.count, "mean": timer.total / timer.count}
                for phase, timer in self.timers.items() if timer.count}

    def format_summary(self) -> str:
        digits = self.time_ndigit
        lines = [f"  {phase:<15} total {values['total']:.{digits}f} s  mean {values['mean']:.{digits}f} s"
                 f"  ({int(values['count'])} calls)" for phase, values in self.summary().items()]
        return "\n".join(lines) if lines else "  nothing timed yet"

    def report(self, when: str) -> None:
        if self._reports:
            logger.info("Time per phase (%s):\n%s", when, self.format_summary())
