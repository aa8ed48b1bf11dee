"""``NanGuardCallback``: stop at the first NaN/inf loss, before it reaches the weights."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional, Union

from fastcore_train.controllers.batch_io import extract_loss
from fastcore_train.events.callback import Callback
from fastcore_train.log import logger


class NonFiniteLossError(RuntimeError):
    """Raised by :class:`NanGuardCallback` when the training loss is NaN or infinite."""


#: How often the Trainer's default guard (``nan_guard=True``) reads the loss: every this many batches.
DEFAULT_CHECK_EVERY = 50


class NanGuardCallback(Callback):
    """Check the loss before each backward; if it is NaN or inf on any rank, stop training with
    :class:`NonFiniteLossError` saying where and what to try.

    The check runs before the backward, so the weights are still those of the last finite step:
    with ``folder`` set they are saved there first as a resumable checkpoint
    (``folder/nonfinite_loss-epoch_<e>-batch_<b>``); checkpoints written earlier (e.g. by
    :class:`~fastcore_train.callbacks.CheckpointCallback`) are untouched. ``check_every=n``
    checks the first batch, every n-th one after it and each epoch's last batch only (each check
    reads the loss from the device and, with several ranks, sums one flag over them); a loss
    that turned non-finite between two checks may then have reached the weights already.

    ``deferred=True`` reads the loss at the end of its batch instead, once the backward and the
    optimizer step are queued, so that on an asynchronous device (CUDA, oneflow's runtime) the
    read never waits for the work just queued; the batch is named as before, but its update has
    reached the weights, so nothing is saved (no ``folder``), and the guard stops the run before
    any other callback of that batch end (a checkpoint among them) sees those weights.

    The Trainer adds one with ``check_every=50, deferred=True`` by default (``Trainer(nan_guard=...)``).
    """

    def __init__(self, folder: Union[str, Path, None] = None, check_every: int = 1,
                 only_state_dict: bool = True, deferred: bool = False) -> None:
        if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every <= 0:
            raise ValueError(f"check_every must be a positive int, got {check_every!r}.")
        if deferred and folder is not None:
            raise ValueError("NanGuardCallback(deferred=True) reads the loss after the step, when the weights are no "
                             "longer the last finite ones: it cannot save them to folder. Pass deferred=False to save "
                             "them, or leave folder out.")
        self.deferred = deferred
        self._pending: Optional[tuple[Any, int, int]] = None  # a deferred read, its epoch and batch
        self.folder = None if folder is None else Path(folder)
        self.check_every = check_every
        self.only_state_dict = only_state_dict
        #: Where the last finite state was saved when the guard fired (None otherwise).
        self.saved_to: Optional[Path] = None
        self._last_finite: Optional[int] = None  # the overall batch number of the last finite check

    def on_before_backward(self, trainer: Any, outputs: Any) -> None:
        if trainer.global_forward_batches % self.check_every \
                and trainer.batch_idx_in_epoch + 1 != trainer.num_batches_per_epoch:
            return
        try:
            loss = outputs["loss"]
        except Exception:
            loss = extract_loss(outputs)
        if self.deferred:
            self._pending = (trainer.driver.data.start_read(loss), trainer.cur_epoch_idx, trainer.batch_idx_in_epoch)
            return
        self._check(trainer, loss, None)

    def on_train_batch_end(self, trainer: Any) -> None:
        if self._pending is not None:
            reading, epoch, batch = self._pending
            self._pending = None
            self._check(trainer, reading, (epoch, batch))

    def _check(self, trainer: Any, loss: Any, deferred_at: Optional[tuple[int, int]]) -> None:
        """Stop when ``loss`` (a tensor, or a read started at ``deferred_at``) is not finite on any rank."""
        try:
            value = float(loss.result() if deferred_at is not None else trainer.driver.data.to_numeric(loss))
        except (TypeError, ValueError):  # not one number: the first batch's loss check says so, clearly
            return
        batches_before = trainer.global_forward_batches - (1 if deferred_at is not None else 0)
        comm = trainer.driver.comm
        if comm.is_distributed():
            # One small all-reduce of a flag (what the stop decision uses); every rank's value is
            # gathered only when one is not finite, to name the ranks. A pickled all_gather_object per
            # check cost oneflow two all-gathers and four reads of their sizes.
            if not comm.sum_over_ranks([not math.isfinite(value)])[0]:
                self._last_finite = batches_before + 1
                return
            values = comm.all_gather_object(value)
        else:
            values = [value]
        bad = {rank: rank_value for rank, rank_value in enumerate(values) if not math.isfinite(rank_value)}
        if bad:
            raise NonFiniteLossError(self._stop(trainer, bad, batches_before, deferred_at))
        self._last_finite = batches_before + 1

    def _stop(self, trainer: Any, bad: dict[int, float], batches_before: int,
              deferred_at: Optional[tuple[int, int]]) -> str:
        epoch, batch = deferred_at if deferred_at is not None else (trainer.cur_epoch_idx, trainer.batch_idx_in_epoch)
        where = f"epoch {epoch + 1}, batch {batch + 1} of the epoch (batch {batches_before + 1} overall)"
        if trainer.driver.comm.is_distributed():
            where += " on rank(s) " + ", ".join(f"{rank} (loss {value})" for rank, value in bad.items())
            loss_text = "not finite"
        else:
            loss_text = str(next(iter(bad.values())))
        saved = ""
        if deferred_at is not None:
            message = (f"The training loss is {loss_text} at {where}. It was read after that batch's optimizer step "
                       "(so that reading it never waits for the device), so the weights have taken its update and may "
                       "hold NaN/inf: training stopped before anything else saw them; nothing was saved. Resume from "
                       "your last checkpoint once the cause is fixed (NanGuardCallback(folder=...) checks before the "
                       "backward and saves the last finite weights). Common causes: a learning rate that is too high "
                       "(lower it, or clip gradients with GradClipCallback), fp16 overflow (try fp16=False), or "
                       "NaN/inf in this batch's inputs.")
            logger.error(message)
            return message
        if self.folder is not None:
            target = self.folder / f"nonfinite_loss-epoch_{epoch + 1}-batch_{batches_before}"
            trainer.save_checkpoint(target, only_state_dict=self.only_state_dict)
            self.saved_to = target
            saved = (f" They were saved to {str(target)!r}; continue from there with "
                     f"trainer.run(resume_from=...) once the cause is fixed.")
        if self.check_every == 1:
            weights = "so the weights are those after the last checked finite step"
        else:
            last = "none before" if self._last_finite is None else f"the last, batch {self._last_finite}, was finite"
            weights = (f"but the loss is checked every {self.check_every} batches and at each epoch's last one "
                       f"({last}), so the weights may hold NaN/inf from a batch in between; pass "
                       "NanGuardCallback(check_every=1) to stop at the first such batch")
        message = (f"The training loss is {loss_text} at {where}. Training stopped before this batch's backward, "
                   f"{weights}.{saved} Common causes: a "
                   f"learning rate that is too high (lower it, or clip gradients with GradClipCallback), fp16 "
                   f"overflow (try fp16=False), or NaN/inf in this batch's inputs.")
        logger.error(message)
        return message
