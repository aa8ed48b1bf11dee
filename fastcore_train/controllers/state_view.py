"""The Trainer's progress read (and partly written) as plain attributes.

fastNLP 1.0 callbacks read ``trainer.cur_epoch_idx``, ``trainer.global_forward_batches`` and
the like; these properties forward to the one :class:`~fastcore_train.controllers.state.TrainerState`
(which checkpoints carry) and to the driver, so there is a single source of truth.
"""
from __future__ import annotations

from typing import Any

from fastcore_train.controllers.state import TrainerState
from fastcore_train.drivers.driver import Driver


def _state_attribute(name: str, writable: bool = True) -> property:
    """A Trainer attribute that reads (and, if ``writable``, writes) ``trainer.state.<name>``."""

    def read(self: "StateViewMixin") -> Any:
        return getattr(self.state, name)

    def write(self: "StateViewMixin", value: Any) -> None:
        setattr(self.state, name, value)

    return property(read, write if writable else None, doc=f"``trainer.state.{name}``.")


class StateViewMixin:
    """Mixin for the :class:`~fastcore_train.controllers.trainer.Trainer`: its state as attributes."""

    driver: Driver
    state: TrainerState

    @property
    def model(self) -> Any:
        return self.driver.unwrap_model()

    @property
    def optimizers(self) -> list[Any]:
        return self.driver.optimizers

    # fastNLP 1.0's names of the state's fields (the first four can be set too).
    n_epochs = _state_attribute("n_epochs")
    cur_epoch_idx = _state_attribute("cur_epoch_idx")
    global_forward_batches = _state_attribute("global_forward_batches")
    batch_idx_in_epoch = _state_attribute("batch_idx_in_epoch")
    num_batches_per_epoch = _state_attribute("num_batches_per_epoch", writable=False)
    total_batches = _state_attribute("total_batches", writable=False)

    @property
    def n_batches(self) -> int:
        """Batches the whole run trains (fastNLP 1.0's meaning): ``n_batches=`` when given, else
        batches per epoch times ``n_epochs``; the given value (-1) while that is unknown (an
        unsized dataloader)."""
        total = self.state.total_batches
        return total if total is not None else self.state.n_batches
