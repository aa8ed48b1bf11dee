"""``LRSchedCallback``: step an LR scheduler per batch or per epoch, and checkpoint its state."""
from __future__ import annotations

from typing import Any, Optional

from fastcore_train.events.callback import Callback


class LRSchedCallback(Callback):
    """Steps ``scheduler`` after each optimizer step (``step_on="batch"``) or each epoch.

    Its ``state_dict()`` goes into checkpoints, so a resumed run continues the schedule.
    """

    def __init__(self, scheduler: Any, step_on: str = "batch") -> None:
        if step_on not in ("batch", "epoch"):
            raise ValueError(f"step_on must be 'batch' or 'epoch', got {step_on!r}.")
        if not callable(getattr(scheduler, "step", None)):
            raise TypeError(f"scheduler must have a step() method, got {type(scheduler).__name__}.")
        self.scheduler = scheduler
        self.step_on = step_on

    @property
    def callback_name(self) -> str:
        return f"LRSchedCallback#{type(self.scheduler).__name__}"

    def on_after_optimizers_step(self, trainer: Any, optimizers: list) -> None:
        if self.step_on == "batch":
            self.scheduler.step()

    def on_train_epoch_end(self, trainer: Any) -> None:
        if self.step_on == "epoch":
            self.scheduler.step()

    def on_save_checkpoint(self, trainer: Any) -> Optional[dict]:
        return self.scheduler.state_dict() if hasattr(self.scheduler, "state_dict") else None

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        if states is None:
            return
        load = getattr(self.scheduler, "load_state_dict", None) or getattr(self.scheduler, "set_state_dict")
        load(states)
