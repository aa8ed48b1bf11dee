"""One training epoch: the per-batch hot path of :meth:`Trainer.run <fastcore_train.controllers.trainer.Trainer.run>`.

Fetches each batch, maps and moves it, runs the ``batch_step_fn`` (under ``no_sync`` between
accumulation steps), counts it and evaluates when ``evaluate_every`` says. Listeners are looked
up once per epoch, so an event nobody listens to costs a ``None`` check per batch.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from fastcore_train.controllers.arguments import empty_epoch_message
from fastcore_train.controllers.evaluator import Evaluator
from fastcore_train.controllers.memory import fetch_out_of_memory_error, is_out_of_memory, out_of_memory_error
from fastcore_train.controllers.run_guard import RunGuard
from fastcore_train.controllers.state import TrainerState
from fastcore_train.drivers.driver import Driver
from fastcore_train.events.manager import CallbackManager
from fastcore_train.log import logger
from fastcore_train.parallel.watchdog import STEP, STOP_DECISION
from fastcore_train.samplers.adapt import find_reproducible_batch_sampler
from fastcore_train.utils.param_call import apply_mapping


class TrainLoopMixin:
    """Mixin for the :class:`~fastcore_train.controllers.trainer.Trainer`: its epoch loop."""

    driver: Driver
    dataloader: Any
    state: TrainerState
    callback_manager: CallbackManager
    evaluator: Optional[Evaluator]
    evaluate_every: Any
    accumulation_steps: int
    train_input_mapping: Any
    batch_step_fn: Callable[[Any, Any], None]
    _update_now: bool
    _stop_requested: bool
    _guard: RunGuard
    _batch_cap: Optional[int]
    _batches_before_iter: int
    _epoch_iterating: bool
    _pending_rng_state: Optional[dict[str, Any]]
    _set_rng_state: Callable[[dict[str, Any]], None]
    _get_rng_state: Callable[[], dict[str, Any]]
    run_evaluate: Callable[[], dict[str, Any]]

    def _reached_n_batches(self) -> bool:
        return 0 < self.state.n_batches <= self.state.global_forward_batches

    def _nothing_left_to_train(self) -> bool:
        """True when the state (e.g. restored from a checkpoint) is already at the end of the run."""
        state = self.state
        if state.cur_epoch_idx >= state.n_epochs or self._reached_n_batches():
            return True
        per_epoch = state.num_batches_per_epoch
        if per_epoch is not None and self._batch_cap is not None:
            per_epoch = min(per_epoch, self._batch_cap)
        return state.cur_epoch_idx == state.n_epochs - 1 and per_epoch is not None \
            and state.batch_idx_in_epoch >= per_epoch

    def _warn_partial_accumulation(self) -> None:
        """Say at run time when accumulation groups do not divide an epoch, where fastNLP 1.0 differs.

        Groups here never span epochs: the last batch of an epoch always steps, so no gradient is
        in flight at an epoch's end (where checkpoints, evaluation and per-epoch schedules act),
        and a checkpoint taken there resumes exactly. fastNLP 1.0 counted groups over the whole
        run, carrying an epoch's partial group into the next one.
        """
        k, per_epoch = self.accumulation_steps, self.state.num_batches_per_epoch
        if per_epoch is not None and self._batch_cap is not None:
            per_epoch = min(per_epoch, self._batch_cap)
        if k <= 1 or not per_epoch or per_epoch % k == 0 or not self.driver.comm.is_global_zero():
            return
        span = 2 * per_epoch  # two epochs show the pattern
        in_epoch = [(b - 1) % per_epoch + 1 for b in range(1, span + 1)]
        ours = [b for b, p in enumerate(in_epoch, 1) if p % k == 0 or p == per_epoch]
        theirs = list(range(k, span + 1, k))
        logger.warning(
            "accumulation_steps=%d does not divide the %d batches of an epoch, so each epoch ends with a group of %d "
            "batch(es) that steps the optimizers at the epoch's end (its loss still divided by %d): the optimizers step "
            "after global batches %s. Groups never span epochs, so a checkpoint at an epoch's end resumes exactly. "
            "fastNLP 1.0 counted groups across epochs instead (steps after %s). To step every %d batches throughout, "
            "make the batches per epoch a multiple of %d (batch_size, drop_last, num_train_batch_per_epoch).",
            k, per_epoch, per_epoch % k, k, _listed(ours), _listed(theirs), k, k)

    def _train_epoch(self) -> bool:
        """One pass over the training dataloader; the per-batch hot path lives here.

        Returns whether the epoch is finished: False when ``n_batches`` or ``stop_training()`` ended
        it before its last batch (it then stays open, see :meth:`_keep_epoch_open`).
        """
        manager = self.callback_manager
        fetch_begin, fetch_end = manager.on_fetch_data_begin, manager.on_fetch_data_end
        batch_begin, batch_end = manager.on_train_batch_begin, manager.on_train_batch_end
        driver = self.driver
        state = self.state
        to_device = driver.data.to_device
        mapping = self.train_input_mapping
        batch_step_fn = self.batch_step_fn
        accumulation = self.accumulation_steps
        no_sync = accumulation > 1 and driver.comm.is_distributed()
        n_batches = state.n_batches
        evaluate_every = self.evaluate_every if self.evaluator is not None else None
        every_batches = evaluate_every if isinstance(evaluate_every, int) and evaluate_every > 0 else 0
        evaluate_when = evaluate_every if callable(evaluate_every) else None
        guard = self._guard
        collective_stop = guard.distributed  # decided by every rank at each optimizer step

        iterator, per_epoch = self._start_epoch_iterator()
        finished = False
        while True:
            if fetch_begin is not None:
                fetch_begin(self)
            try:
                batch = next(iterator)
            except StopIteration:
                finished = True
                break
            except (MemoryError, RuntimeError) as error:  # in the user's collate_fn or __getitem__
                if not is_out_of_memory(error):
                    raise
                raise fetch_out_of_memory_error(error, state.cur_epoch_idx + 1, state.batch_idx_in_epoch + 1,
                                                state.global_forward_batches + 1) from error
            if fetch_end is not None:
                fetch_end(self)
            if mapping is not None:
                batch = apply_mapping(mapping, batch)
            batch = to_device(batch)  # moved to the device; numpy batches become tensors
            if batch_begin is not None:
                batch_begin(self, batch, None)
            if collective_stop:
                guard.beat(state.global_forward_batches + 1, STEP)
            try:  # costs nothing unless it raises (Python 3.11+)
                if accumulation > 1:
                    done = state.batch_idx_in_epoch + 1
                    self._update_now = done % accumulation == 0 or done == per_epoch
                    if no_sync and not self._update_now:
                        with driver.no_sync():
                            batch_step_fn(self, batch)
                    else:
                        batch_step_fn(self, batch)
                else:
                    batch_step_fn(self, batch)
            except (MemoryError, RuntimeError) as error:
                if not is_out_of_memory(error):
                    raise
                raise out_of_memory_error(error, state.cur_epoch_idx + 1, state.batch_idx_in_epoch + 1,
                                          state.global_forward_batches + 1, batch, accumulation) from error
            state.global_forward_batches += 1
            state.batch_idx_in_epoch += 1
            if batch_end is not None:
                batch_end(self)
            if every_batches and state.global_forward_batches % every_batches == 0:
                self.run_evaluate()
            elif evaluate_when is not None and evaluate_when(self):
                self.run_evaluate()
            if state.batch_idx_in_epoch == per_epoch:
                finished = True
                break  # the epoch's end decides about stopping (Trainer.run)
            if state.global_forward_batches == n_batches:
                break
            if collective_stop:
                if self._update_now and guard.decide_stop_after_step(self._stop_requested,
                                                                     state.global_forward_batches):
                    self._stop_requested = True
                    break
            elif (self._stop_requested or guard.interrupt_requested) \
                    and guard.decide_stop(self._stop_requested, state.global_forward_batches, STOP_DECISION):
                break
        if state.batch_idx_in_epoch == 0:  # the dataloader gave nothing this epoch (sized ones are checked earlier)
            raise ValueError(empty_epoch_message(state.cur_epoch_idx + 1, state.global_forward_batches))
        self._epoch_iterating = not finished
        return finished

    def _start_epoch_iterator(self) -> tuple[Any, int]:
        """The epoch's batch iterator (resuming where a checkpoint stopped) and its batch count.

        A reproducible sampler resumes by itself; for any other dataloader the batches already
        trained are fetched and dropped, which is exact only if its order is deterministic.
        """
        state = self.state
        self._batches_before_iter = done = state.batch_idx_in_epoch
        # Read before iter(): a loader that prefetches (paddle's thread, torch's workers) may draw a
        # resumed epoch's few remaining batches at once, and the sampler's length then already
        # describes the next epoch; ranks that read it on either side of that would disagree on
        # where the epoch ends and wait for each other forever.
        remaining = self.driver.data.length(self.dataloader)
        iterator = iter(self.dataloader)
        if done and find_reproducible_batch_sampler(self.driver, self.dataloader) is None:
            logger.warning("Resuming mid-epoch without a reproducible sampler: skipping %d batches; the "
                           "data order matches the interrupted run only if the dataloader is deterministic.", done)
            for _ in range(done):
                next(iterator)
            self._batches_before_iter = 0
        if self._pending_rng_state is not None:
            self._set_rng_state(self._pending_rng_state)
            self._pending_rng_state = None
        cap = self._batch_cap
        if remaining is None:
            per_epoch = -1 if cap is None else cap
        else:
            per_epoch = remaining + self._batches_before_iter
            per_epoch = per_epoch if cap is None else min(per_epoch, cap)
        state.num_batches_per_epoch = None if per_epoch == -1 else per_epoch
        self._epoch_iterating = True
        return iterator, per_epoch

    def _keep_epoch_open(self) -> None:
        """After a run that ended inside an epoch: hold its position as a checkpoint would.

        The sampler's next iteration starts after the batches trained, and this rank's random
        states are put back when that iteration begins (creating a dataloader iterator may draw
        from the framework's generator), so another ``run()`` continues the epoch where a resume
        from a checkpoint saved now would. A no-op when no epoch is being iterated.
        """
        if not self._epoch_iterating:
            return
        self._epoch_iterating = False
        state = self.state
        sampler = find_reproducible_batch_sampler(self.driver, self.dataloader)
        if sampler is not None:
            consumed = state.batch_idx_in_epoch - self._batches_before_iter
            sampler.load_state_dict(sampler.state_dict(num_consumed_batches=consumed))
            self._batches_before_iter = state.batch_idx_in_epoch
        self._pending_rng_state = self._get_rng_state()


def _listed(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) + ", ..."
