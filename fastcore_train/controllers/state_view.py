"""The Trainer's progress read (and partly written) as plain attributes.

fastNLP 1.0 callbacks read ``trainer.cur_epoch_idx``, ``trainer.global_forward_batches`` and
the like; these properties forward to the one :class:`~fastcore_train.controllers.state.TrainerState`
(which checkpoints carry) and to the driver, so there is a single source of truth.
"""
from __future__ import annotations

from typing import Any, Optional

from fastcore_train.controllers.state import TrainerState
from fastcore_train.drivers.driver import Driver


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

    @property
    def n_epochs(self) -> int:
        return self.state.n_epochs

    @n_epochs.setter
    def n_epochs(self, value: int) -> None:
        self.state.n_epochs = value

    @property
    def cur_epoch_idx(self) -> int:
        return self.state.cur_epoch_idx

    @cur_epoch_idx.setter
    def cur_epoch_idx(self, value: int) -> None:
        self.state.cur_epoch_idx = value

    @property
    def global_forward_batches(self) -> int:
        return self.state.global_forward_batches

    @global_forward_batches.setter
    def global_forward_batches(self, value: int) -> None:
        self.state.global_forward_batches = value

    @property
    def batch_idx_in_epoch(self) -> int:
        return self.state.batch_idx_in_epoch

    @batch_idx_in_epoch.setter
    def batch_idx_in_epoch(self, value: int) -> None:
        self.state.batch_idx_in_epoch = value

    @property
    def num_batches_per_epoch(self) -> Optional[int]:
        return self.state.num_batches_per_epoch

    @property
    def n_batches(self) -> int:
        """Batches the whole run trains (fastNLP 1.0's meaning): ``n_batches=`` when given, else
        batches per epoch times ``n_epochs``; the given value (-1) while that is unknown (an
        unsized dataloader)."""
        total = self.state.total_batches
        return total if total is not None else self.state.n_batches

    @property
    def total_batches(self) -> Optional[int]:
        return self.state.total_batches
