"""The Trainer's step primitives: forward, backward, optimizer step and zero grad.

A ``batch_step_fn`` composes these four; each fires its events around the driver call and
honours gradient accumulation, so a custom step keeps the Trainer's bookkeeping for free.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from fastcore_train.controllers.batch_io import ModelCaller, extract_loss
from fastcore_train.controllers.loss_check import check_loss
from fastcore_train.controllers.train_output import LossTally
from fastcore_train.drivers.driver import Driver
from fastcore_train.events.manager import CallbackManager
from fastcore_train.utils.param_call import apply_mapping

#: An optimizer event of the callback manager: ``event(trainer, optimizers)``.
OptimizerEvent = Callable[[Any, list], None]


class BatchStepMixin:
    """Mixin for the :class:`~fastcore_train.controllers.trainer.Trainer`: the per-batch primitives."""

    driver: Driver
    callback_manager: CallbackManager
    fp16: bool
    accumulation_steps: int
    train_output_mapping: Any
    last_loss: Any
    _loss_tally: LossTally
    _call_model: ModelCaller
    _update_now: bool  # this micro-batch ends an accumulation group: step and zero grad
    _wait_for_checkpoint_snapshot: Callable[[], None]
    _loss_checked: bool = False  # the first loss was checked (one number, with a gradient)

    def train_step(self, batch: Any) -> Any:
        """The training forward (``train_fn``/``train_step``/forward), output_mapping applied."""
        if self.fp16:
            with self.driver.precision.forward_context():
                outputs = self._call_model(batch)
        else:
            outputs = self._call_model(batch)
        if self.train_output_mapping is not None:
            outputs = apply_mapping(self.train_output_mapping, outputs)
        return outputs

    @staticmethod
    def extract_loss_from_outputs(outputs: Any) -> Any:
        """The loss in a training step's ``outputs``: ``outputs["loss"]`` of a dict, or the
        ``loss`` attribute of a dataclass (or any object that has one); an error that says how to
        provide one otherwise. fastNLP 1.0's name; callbacks use it to read the loss."""
        return extract_loss(outputs)

    def backward(self, outputs: Any) -> None:
        """Backward the ``loss`` in ``outputs`` (divided by ``accumulation_steps``); the first
        loss is checked to be one number with a gradient (:mod:`~fastcore_train.controllers.loss_check`)."""
        manager = self.callback_manager
        if manager.on_before_backward is not None:
            manager.on_before_backward(self, outputs)
        try:
            loss = outputs["loss"]
        except Exception:
            loss = self.extract_loss_from_outputs(outputs)
        self.last_loss = loss
        if not self._loss_checked:  # the first batch only: what a wrong loss looks like does not change
            check_loss(loss, self.driver.backend)
            self._loss_checked = True
        self._loss_tally.add(loss)
        if self.accumulation_steps > 1:
            loss = loss / self.accumulation_steps
        self.driver.backward(loss)
        if manager.on_after_backward is not None:
            manager.on_after_backward(self)

    def step(self) -> None:
        """Step the optimizers, on the last micro-batch of each accumulation group only."""
        if self._update_now:
            self._wait_for_checkpoint_snapshot()  # an async save's background copy ends before the state changes
            manager = self.callback_manager
            self._around_optimizers(manager.on_before_optimizers_step, self.driver.step,
                                    manager.on_after_optimizers_step)

    def zero_grad(self) -> None:
        """Clear gradients, on the last micro-batch of each accumulation group only."""
        if self._update_now:
            manager = self.callback_manager
            self._around_optimizers(manager.on_before_zero_grad, self.driver.zero_grad, manager.on_after_zero_grad)

    def _around_optimizers(self, before: Optional[OptimizerEvent], action: Callable[[], None],
                           after: Optional[OptimizerEvent]) -> None:
        """``action()`` between the events ``before`` and ``after`` (None: no callback listens),
        which are given the driver's optimizers."""
        if before is not None:
            before(self, self.driver.optimizers)
        action()
        if after is not None:
            after(self, self.driver.optimizers)
