"""Saving and loading a Trainer: the model alone, or a checkpoint to resume training exactly.

The files are written by :mod:`fastcore_train.checkpoint`; this part gathers what goes into
them from the trainer (its counters, sampler position, callback and event-filter states, every
rank's RNG states) and puts it all back, keeping the ranks in step around each write.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, Optional, Union

from fastcore_train import checkpoint as ckpt
from fastcore_train.checkpoint.replacement import (LOAD_TRIES, CheckpointReplacedError, folder_identity,
                                                   replaced_error, replaced_since)
from fastcore_train.checkpoint.async_writer import AsyncCheckpointWriter, flush_in_background, start_async_checkpoint
from fastcore_train.controllers.checkpoint_checks import (OPTIMIZERS_KEY, check_optimizer_classes, load_checked,
                                                          optimizer_classes, read_checked)
from fastcore_train.controllers.state import TrainerState
from fastcore_train.convert.weights import LAYERS_KEY, layout_record
from fastcore_train.drivers.driver import Driver
from fastcore_train.events.manager import CallbackManager
from fastcore_train.log import logger
from fastcore_train.parallel.watchdog import keeps_alive
from fastcore_train.samplers.adapt import find_reproducible_batch_sampler


@dataclasses.dataclass
class _ReadCheckpoint:
    """What one read of a checkpoint gave, before any of it is applied."""

    meta: dict[str, Any]
    folder: Path
    model_path: Optional[Path] = None
    apply_model: Optional[Callable[[], None]] = None
    state_path: Optional[Path] = None
    apply_state: Optional[Callable[[], None]] = None
    trainer_state: Any = None
    rank_state: Any = None
    callback_states: Any = None


class PersistenceMixin:
    """Mixin for the :class:`~fastcore_train.controllers.trainer.Trainer`: ``save_*``/``load_*``.

    Relies on :class:`~fastcore_train.controllers.random_state.RandomStateMixin` for the RNG
    states and on the trainer's ``_fire`` for the save/load events.
    """

    driver: Driver
    dataloader: Any
    state: TrainerState
    callback_manager: CallbackManager
    _batches_before_iter: int
    _pending_rng_state: Optional[dict[str, Any]]
    _fire: Callable[..., None]
    _get_rng_state: Callable[[], dict[str, Any]]
    _user_optimizers: list[Any]  # the optimizers the user gave (the driver may wrap them)

    @keeps_alive  # a long save or load is no collective timeout
    def save_model(self, folder: Union[str, Path], only_state_dict: bool = True,
                   model_save_fn: Optional[Callable[[Path], None]] = None, **kwargs: Any) -> None:
        """Write the model into ``folder`` (as ``model<suffix>``, or via ``model_save_fn(folder)``)."""
        self._fire("on_save_model")
        folder = Path(folder)
        if model_save_fn is not None:
            if self.driver.comm.is_global_zero():
                folder.mkdir(parents=True, exist_ok=True)
                model_save_fn(folder)
        elif self.driver.comm.is_global_zero() or self.driver.io.collective_save:
            ckpt.write_model_file(folder, self.driver, only_state_dict, **kwargs)
        self.driver.comm.barrier()

    @keeps_alive  # a long save or load is no collective timeout
    def load_model(self, folder: Union[str, Path], only_state_dict: bool = True,
                   model_load_fn: Optional[Callable[[Path], None]] = None, **kwargs: Any) -> None:
        """Restore the model written by :meth:`save_model` (every rank loads)."""
        self.wait_for_checkpoint()
        self._fire("on_load_model")
        folder = Path(folder)
        if model_load_fn is not None:
            model_load_fn(folder)
        else:
            path = ckpt.model_file(folder, self.driver)
            if not path.exists():
                raise FileNotFoundError(
                    f"No model file at {str(path)!r}: load_model expects the folder given to save_model "
                    f"(which writes {path.name} inside it)."
                )
            load_checked(path, "model", lambda: self.driver.io.load_model(path, only_state_dict=only_state_dict,
                                                                          **kwargs))
        self.driver.comm.barrier()

    @keeps_alive  # a long save or load is no collective timeout
    def save_checkpoint(self, folder: Union[str, Path], only_state_dict: bool = True,
                        model_save_fn: Optional[Callable[[Path], None]] = None,
                        extra_json: Optional[dict[str, Any]] = None, blocking: bool = True) -> None:
        """Write everything needed to resume exactly into ``folder``, atomically.

        Model, optimizers (and grad scaler), the sampler's position, trainer counters, callback
        states, event-filter counters, and each rank's RNG states (python, numpy, framework) in a file
        written by that rank.
        ``folder`` may be new, empty, or an earlier checkpoint (replaced whole); anything else
        there is the user's, and saving raises :class:`~fastcore_train.checkpoint.CheckpointTargetError`
        on every rank, leaving it untouched.

        ``blocking=True`` returns once the checkpoint is in place, complete; it is then flushed to
        disk in the background, and a checkpoint it replaced is deleted only after that.
        ``blocking=False`` snapshots the state to host memory and returns; the files are written in
        the background and published only when complete (see :mod:`fastcore_train.checkpoint.async_writer`).
        One write is in flight at a time: any save first waits for the previous one and raises its
        error; :meth:`wait_for_checkpoint` waits too, and ``run`` does when it ends.
        """
        self.wait_for_checkpoint()
        problem = (ckpt.checkpoint_target_problem(folder) or ckpt.concurrent_writer_problem(folder)) \
            if self.driver.comm.is_global_zero() else None
        problem = self.driver.comm.broadcast_object(problem)  # every rank raises alike, none waits
        if problem is not None:
            raise ckpt.CheckpointTargetError(problem)
        self._warn_open_accumulation_group()
        # Every rank encodes (and raises alike for a state that is not JSON), before anything is written.
        callback_states = ckpt.encode_callback_states(self.callback_manager.callback_states(self))
        sampler = find_reproducible_batch_sampler(self.driver, self.dataloader)
        consumed = self.state.batch_idx_in_epoch - self._batches_before_iter
        trainer_state = {
            "state": self.state.state_dict(),
            "sampler": None if sampler is None else sampler.state_dict(num_consumed_batches=consumed),
            "event_filters": self.callback_manager.filter_states(),
        }
        # Every rank writes its own random state (not gathered to rank 0: rank 0's files keep their
        # size at any world size); the model and the JSON files are written as write_checkpoint says.
        content = dict(trainer_state=trainer_state, callback_states=callback_states, only_state_dict=only_state_dict,
                       model_save_fn=model_save_fn, extra_json=extra_json, rank_state=self._rng_state_to_save(),
                       extra_meta={OPTIMIZERS_KEY: optimizer_classes(self._user_optimizers),
                                   LAYERS_KEY: None if self.driver.io.collective_save  # sharded: not converted
                                   and not self.driver.io.converter_reads_sharded_files
                                   else layout_record(self.driver.unwrap_model())})
        if blocking:
            previous: list[Path] = []
            ckpt.write_checkpoint(folder, self.driver, previous=previous, **content)
            if self.driver.comm.is_global_zero():
                flush_in_background(self._checkpoint_writer(), Path(folder), previous)
            self.driver.comm.barrier()
        else:
            start_async_checkpoint(self._checkpoint_writer(), folder, self.driver, content)

    def _rng_state_to_save(self) -> dict[str, Any]:
        """This rank's random states where training resumes: those a loaded checkpoint or a run stopped
        mid-epoch left pending for the next epoch iterator, else the live ones."""
        pending = self._pending_rng_state
        return self._get_rng_state() if pending is None else pending

    @keeps_alive  # a long save or load is no collective timeout
    def wait_for_checkpoint(self) -> None:
        """Wait until the checkpoint in flight is published and on disk; raise its error if it
        failed (:class:`~fastcore_train.checkpoint.async_writer.AsyncCheckpointError`). No-op when none is.
        Call it before changing the model's parameters outside the optimizer step while an
        asynchronous save may be copying them."""
        writer = getattr(self, "_async_writer", None)
        if writer is not None:
            writer.wait()

    def _wait_for_checkpoint_snapshot(self) -> None:
        """Before an optimizer step: wait until an asynchronous checkpoint's background copy of
        the parameters and optimizer state is taken (at once when there is none)."""
        writer = getattr(self, "_async_writer", None)
        if writer is not None:
            writer.wait_for_snapshot()

    def after_checkpoint_written(self, action: Callable[[], None]) -> None:
        """Run ``action`` (e.g. deleting a checkpoint a newer one replaces) once the checkpoint in
        flight is published and on disk, or now when none is."""
        self._checkpoint_writer().after(action)

    def _checkpoint_writer(self) -> AsyncCheckpointWriter:
        if getattr(self, "_async_writer", None) is None:
            self._async_writer = AsyncCheckpointWriter()
        return self._async_writer

    def _warn_open_accumulation_group(self) -> None:
        """A checkpoint in the middle of an accumulation group does not hold the gradients
        accumulated so far: say so, since a resume from it is then not bit-identical."""
        state, k = self.state, getattr(self, "accumulation_steps", 1)
        done = state.batch_idx_in_epoch
        if k <= 1 or done % k == 0 or done == state.num_batches_per_epoch or not self.driver.comm.is_global_zero():
            return
        logger.warning("Checkpoint saved after batch %d of the epoch, inside an accumulation group (accumulation_steps=%d): "
                       "the %d batch(es) of gradients accumulated since the last optimizer step are not saved, so a run "
                       "resumed from it steps without them. Save every k batches (every_n_batches a multiple of %d) or at "
                       "epoch ends to resume exactly.", done, k, done % k, k)

    @keeps_alive  # a long save or load is no collective timeout
    def load_checkpoint(self, folder: Union[str, Path], resume_training: bool = True,
                        only_state_dict: bool = True,
                        model_load_fn: Optional[Callable[[Path], None]] = None) -> None:
        """Restore a checkpoint; with ``resume_training=False`` only model and optimizers.

        Training then continues from the batch after the one the checkpoint was taken at, with
        the same data order and random streams as an uninterrupted run.
        """
        self.wait_for_checkpoint()  # a save in flight is done with the live state (and the folder)
        given = Path(folder)
        for attempt in range(1, LOAD_TRIES + 1):
            identity = folder_identity(given)
            try:
                read = self._read_checkpoint(given, resume_training, only_state_dict, model_load_fn)
                if folder_identity(given) != identity:  # replaced while read: some files may be the next version's
                    raise CheckpointReplacedError(f"{str(given)!r} was replaced while it was read.")
                break
            except (OSError, ckpt.CheckpointError) as error:
                if not (isinstance(error, CheckpointReplacedError) or replaced_since(given, identity)):
                    raise  # the same folder in place: real damage
                if attempt == LOAD_TRIES or self.driver.comm.is_distributed():  # (ranks must not load two versions)
                    raise replaced_error(given, attempt, error) from error
                logger.info("Checkpoint %r was replaced by another save while it was read; reading it again.",
                            str(given))
                time.sleep(0.02 * 2 ** attempt)
        folder = read.folder
        if read.apply_model is None:
            model_load_fn(folder)  # type: ignore[misc]
        else:
            load_checked(read.model_path, "model", read.apply_model)
        load_checked(read.state_path, "optimizer state", read.apply_state)
        if resume_training:
            saved = read.trainer_state
            self.state.load_state_dict(saved["state"])
            self.callback_manager.load_filter_states(saved["event_filters"])
            self._load_sampler_state(saved.get("sampler"))
            self._batches_before_iter = self.state.batch_idx_in_epoch  # the sampler's count starts after them
            self._pending_rng_state = read.rank_state
            if self._pending_rng_state is None:  # format 1 and 2: every rank's state in the trainer state
                rng_states = saved["rng"]
                same_world = len(rng_states) == self.driver.comm.world_size
                self._pending_rng_state = rng_states[self.driver.comm.rank if same_world else 0]
                if not same_world:
                    logger.warning("The checkpoint was written by %d rank(s) and is resumed on %d: random streams "
                                   "restart from rank 0's state.", len(rng_states), self.driver.comm.world_size)
            self.callback_manager.load_callback_states(self, read.callback_states)
        self.driver.comm.barrier()

    def _read_checkpoint(self, folder: Path, resume_training: bool, only_state_dict: bool,
                         model_load_fn: Optional[Callable[[Path], None]]) -> "_ReadCheckpoint":
        """Everything :meth:`load_checkpoint` puts into the trainer, read and checked (nothing applied yet)."""
        meta = ckpt.read_meta(folder, self.driver, verify=False)
        folder = Path(meta["folder"])
        check_optimizer_classes(meta, self._user_optimizers, folder)  # before anything is loaded
        io = self.driver.io
        # The files are hashed on helper threads while the framework reads them; nothing read is put
        # into the model or optimizers before every checksum matched (one pass over the files).
        # Every file read below must have a checksum; the record is checked before any is opened.
        needed = [ckpt.model_file(folder, self.driver).name] if model_load_fn is None else []
        needed += [f"{ckpt.TRAINING_STATE_STEM}{io.model_file_suffix}", ckpt.TRAINER_STATE_FILE,
                   ckpt.CALLBACK_STATE_FILE] + [path.name for path in folder.glob("rank_state_*.npz")]
        read = _ReadCheckpoint(meta, folder)
        with ckpt.Verification(folder, meta, needed) as verification:
            try:
                if model_load_fn is None:
                    path = read.model_path = ckpt.require_file(ckpt.model_file(folder, self.driver), "model file")
                    only = meta.get("only_state_dict", only_state_dict)
                    read.apply_model = read_checked(path, "model", lambda: io.model_reader(path, only_state_dict=only))
                state_path = read.state_path = ckpt.require_file(
                    folder / f"{ckpt.TRAINING_STATE_STEM}{io.model_file_suffix}", "optimizer state")
                read.apply_state = read_checked(state_path, "optimizer state",
                                                lambda: io.training_state_reader(state_path))
                if resume_training:
                    read.trainer_state = ckpt.read_trainer_state(folder)
                    read.rank_state = ckpt.read_rank_random_state(folder, meta, self.driver.comm.rank,
                                                                  self.driver.comm.world_size)
                    read.callback_states = ckpt.read_callback_states(folder, meta["format_version"])
            except BaseException:
                verification.result()  # a checksum mismatch says better why a read failed
                raise
            verification.result()
        return read

    def _load_sampler_state(self, sampler_state: Optional[dict[str, Any]]) -> None:
        sampler = find_reproducible_batch_sampler(self.driver, self.dataloader)
        if sampler_state is not None and sampler is not None:
            sampler.load_state_dict(sampler_state)
        elif sampler_state is not None or self.state.batch_idx_in_epoch:
            logger.warning("The checkpoint's data position cannot be restored exactly: %s.",
                           "this trainer's dataloader has no reproducible sampler" if sampler is None else
                           "it was written without a reproducible sampler")
