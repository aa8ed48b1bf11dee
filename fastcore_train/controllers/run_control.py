"""A run's course inside ``Trainer.run``: resume, evaluate before training, the epochs, the end,
and what an exception or Ctrl-C leaves behind (the epoch held open, checkpoints published, the
listeners told), then the :class:`TrainOutput` the run returns.

A mixin of :class:`~fastcore_train.controllers.trainer.Trainer`, beside the epoch loop
(:mod:`~fastcore_train.controllers.train_loop`) it drives.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Optional, Union

from fastcore_train.checkpoint.resume import choose_resume_folder, is_auto
from fastcore_train.controllers.run_guard import RunGuard, TrainingRequeued, TrainingTerminated
from fastcore_train.controllers.state import TrainerState
from fastcore_train.controllers.train_output import LossTally, TrainOutput, epochs_done
from fastcore_train.drivers.driver import Driver
from fastcore_train.events.manager import CallbackManager
from fastcore_train.log import logger
from fastcore_train.parallel.watchdog import EPOCH_END, EPOCH_STOP_DECISION, TRAIN_END


class RunControlMixin:
    """Mixin for the :class:`~fastcore_train.controllers.trainer.Trainer`: the course of one ``run()``."""

    driver: Driver
    state: TrainerState
    callback_manager: CallbackManager
    evaluator: Any
    evaluate_results: dict[str, Any]
    dataloader: Any
    _guard: RunGuard
    _loss_tally: LossTally
    _batches_at_start: int
    _batches_before_iter: int
    _stop_requested: bool
    _fire: Callable[..., None]
    _rng_preserved: Callable[[], Any]
    _train_epoch: Callable[[], bool]
    _keep_epoch_open: Callable[[], None]
    _reached_n_batches: Callable[[], bool]
    _nothing_left_to_train: Callable[[], bool]
    _warn_partial_accumulation: Callable[[], None]
    load_checkpoint: Callable[..., Any]
    wait_for_checkpoint: Callable[[], None]
    evaluates_at_epoch_end: Callable[[], bool]
    run_evaluate: Callable[[], dict[str, Any]]

    def _train_output(self, runtime: float) -> TrainOutput:
        """This run's :class:`TrainOutput`: the batches trained, the mean loss, speed and the last results."""
        state = self.state
        training_loss = self._loss_tally.mean()
        trained = state.global_forward_batches - self._batches_at_start
        metrics: dict[str, Any] = {
            "train_runtime": round(runtime, 4),
            "train_steps_per_second": round(trained / runtime, 3) if runtime > 0 else math.nan,
            "train_loss": training_loss,
            "epoch": epochs_done(state.cur_epoch_idx, state.batch_idx_in_epoch, state.num_batches_per_epoch),
        }
        for key, value in self.evaluate_results.items():
            metrics.setdefault(key, value)
        return TrainOutput(state.global_forward_batches, training_loss, metrics)

    def _run_guarded(self, num_eval_sanity_batch: int, resume_from: Optional[Union[str, Path]],
                     resume_training: bool, catch_KeyboardInterrupt: bool) -> None:
        """:meth:`run` inside its :class:`~fastcore_train.controllers.run_guard.RunGuard`."""
        guard = self._guard
        try:
            if is_auto(resume_from):
                resume_from = choose_resume_folder(str(resume_from), self.callback_manager.callbacks, self.driver.comm)
            if resume_from is not None:
                self.load_checkpoint(resume_from, resume_training=resume_training)
                self._batches_at_start = self.state.global_forward_batches
            if self.state.n_epochs == 0 and self.state.n_batches <= 0:
                amount = "every batch" if num_eval_sanity_batch < 0 else f"{num_eval_sanity_batch} batch(es)"
                logger.info("n_epochs=0: no batch is trained; only the evaluation before training runs, on %s of "
                            "each evaluate dataloader (num_eval_sanity_batch=%d).", amount, num_eval_sanity_batch)
            elif self._nothing_left_to_train():
                self._warn_nothing_left(resume_from)
            else:
                self._warn_partial_accumulation()
            if self.evaluator is not None and num_eval_sanity_batch != 0:
                self._fire("on_sanity_check_begin")
                with self._rng_preserved():
                    sanity_results = self.evaluator.run(num_eval_batch_per_dl=num_eval_sanity_batch)
                self._fire("on_sanity_check_end", sanity_results)
            self._fire("on_train_begin")
            self.driver.comm.barrier()
            state = self.state
            self._stop_requested = False
            while state.cur_epoch_idx < state.n_epochs and not self._reached_n_batches() and not self._stop_requested:
                self.driver.set_model_mode("train")
                self._fire("on_train_epoch_begin")
                self.driver.data.set_epoch(self.dataloader, state.cur_epoch_idx)
                if not self._train_epoch():
                    break  # stopped inside the epoch: it stays open for a checkpoint or another run()
                state.cur_epoch_idx += 1
                state.batch_idx_in_epoch = self._batches_before_iter = 0
                self._fire("on_train_epoch_end")
                guard.beat(state.global_forward_batches, EPOCH_END)
                self.driver.comm.barrier()
                if self.evaluates_at_epoch_end():
                    self.run_evaluate()
                if state.cur_epoch_idx < state.n_epochs and not self._reached_n_batches():
                    self._stop_requested = guard.decide_stop(self._stop_requested, state.global_forward_batches,
                                                             EPOCH_STOP_DECISION)
            self._keep_epoch_open()
            self._fire("on_train_end")
            self.wait_for_checkpoint()  # an asynchronous checkpoint is published before run() returns
            guard.beat(state.global_forward_batches, TRAIN_END)
            self.driver.comm.barrier()
        except KeyboardInterrupt as interrupt:
            self._keep_epoch_open_quietly()
            self._fire_exception(interrupt)
            self._wait_for_checkpoint_quietly()
            self.driver.on_exception(interrupt)
            if isinstance(interrupt, TrainingRequeued):  # saved by CheckpointCallback(requeue_signal=...)
                logger.warning("Training stopped for a requeue after batch %d; exiting with status %d.",
                               self.state.global_forward_batches, interrupt.exit_code)
                raise SystemExit(interrupt.exit_code) from None
            if not catch_KeyboardInterrupt:
                raise
            logger.warning("Training interrupted (%s) at epoch %d, batch %d.",
                           "SIGTERM" if isinstance(interrupt, TrainingTerminated) else "KeyboardInterrupt",
                           self.state.cur_epoch_idx, self.state.batch_idx_in_epoch)
        except BaseException as error:
            self._keep_epoch_open_quietly()
            self._fire_exception(error)
            self._wait_for_checkpoint_quietly()
            self.driver.on_exception(error)
            raise

    def _fire_exception(self, error: BaseException) -> None:
        """Run every ``on_exception`` listener; one that fails is logged and noted on ``error``
        (``add_note``, Python 3.11+), never raised in its place: ``run()`` raises the run's own error."""
        for name, failure in self.callback_manager.fire_exception(self, error):
            text = (f"The on_exception listener {name} failed while handling {type(error).__name__}: "
                    f"{type(failure).__name__}: {failure}")
            logger.error("%s", text, exc_info=failure)
            add_note = getattr(error, "add_note", None)
            if add_note is not None:
                add_note(text)

    def _keep_epoch_open_quietly(self) -> None:
        """On an exception: hold the interrupted epoch's position, logging (not raising) a failure
        so that the run's own exception is the one raised."""
        try:
            self._keep_epoch_open()
        except Exception as error:  # noqa: BLE001 - reported, the original exception follows
            logger.error("The interrupted epoch's position could not be kept for another run(): %s", error)

    def _wait_for_checkpoint_quietly(self) -> None:
        """On an exception: let an asynchronous checkpoint finish, logging (not raising) its error so
        that the run's own exception is the one raised."""
        try:
            self.wait_for_checkpoint()
        except Exception as error:  # noqa: BLE001 - reported, the original exception follows
            logger.error("%s", error)

    def _warn_nothing_left(self, resume_from: Optional[Union[str, Path]]) -> None:
        state = self.state
        source = f" (restored from {str(resume_from)!r})" if resume_from is not None else ""
        limit = f"n_batches={state.n_batches}" if self._reached_n_batches() else f"n_epochs={state.n_epochs}"
        more = "n_batches" if self._reached_n_batches() else "n_epochs"
        logger.warning(
            "Nothing is left to train: %d epoch(s) and %d batch(es) in all are done%s, which already reaches "
            "%s; run() trains no batch. To train more, build the Trainer with a larger %s (it counts from the "
            "start of training, not from the checkpoint).",
            state.cur_epoch_idx, state.global_forward_batches, source, limit, more)
