"""``LRSchedCallback``: step an LR scheduler per batch or per epoch, and checkpoint its state."""
from __future__ import annotations

import warnings
from typing import Any, Optional

from fastcore_train.checkpoint import LR_POSITION  # a converted checkpoint's schedule position (see convert/)
from fastcore_train.events.callback import Callback

_ATTRIBUTES = "__plain_attributes__"


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_plain(item) for key, item in value.items())
    return False


class LRSchedCallback(Callback):
    """Steps ``scheduler`` after each optimizer step (``step_on="batch"``) or each epoch.

    Its ``state_dict()`` goes into checkpoints, so a resumed run continues the schedule. A
    scheduler without one (e.g. jittor's) is saved as its plain attributes (numbers, strings and
    containers of them), everything but the optimizer it drives.
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
        if hasattr(self.scheduler, "state_dict"):
            return self.scheduler.state_dict()
        return {_ATTRIBUTES: {name: value for name, value in vars(self.scheduler).items()
                              if name != "optimizer" and _is_plain(value)}}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        if states is None:
            return
        if LR_POSITION in states:  # converted from another framework: replay the schedule to its position
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch: "lr_scheduler.step() before optimizer.step()"
                for _ in range(int(states[LR_POSITION])):
                    self.scheduler.step()
            return
        if _ATTRIBUTES in states and not hasattr(self.scheduler, "state_dict"):
            for name, value in states[_ATTRIBUTES].items():
                setattr(self.scheduler, name, value)
            return
        load = getattr(self.scheduler, "load_state_dict", None) or getattr(self.scheduler, "set_state_dict")
        load(states)
