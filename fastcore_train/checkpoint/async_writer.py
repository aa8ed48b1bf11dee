"""Asynchronous checkpoints: snapshot now, write in the background, publish when complete.

``Trainer.save_checkpoint(folder, blocking=False)`` (and ``CheckpointCallback(async_save=True)``)
snapshots the checkpoint's state (:func:`~fastcore_train.checkpoint.checkpoint_content` with
``snapshot=True``: the backend's ``snapshot.py`` copies the tensors to host memory, the JSON files
become text) and returns; a background thread writes the files into the same temporary folder a
synchronous save uses, flushes them to disk and renames the folder into place only when every file
of every rank is there, so a crash during the write leaves the previous checkpoint as it was (the
temporary folder of a dead writer is removed by the next save).

Where the backend allows it (``io.copies_in_background``: torch), the copy of the parameters and
optimizer state is itself made by the background thread, while the next batch's forward and
backward run; the Trainer waits for it (:meth:`AsyncCheckpointWriter.wait_for_snapshot`) before
the next optimizer step, the first thing that changes them. What the forward pass changes
(batch-norm statistics) is copied at once.

The same writer flushes a *blocking* save to disk after it is published
(:func:`~fastcore_train.utils.atomic.make_durable`), and runs the deletions that must wait for it
(:meth:`AsyncCheckpointWriter.after`: a top-k checkpoint dropped for a better one).

- At most one write is in flight per trainer: the next save (sync or async) first waits for it.
- An error of the background write is kept and raised by the next save, or by
  :meth:`AsyncCheckpointWriter.wait` (the Trainer calls it when ``run`` ends, also on an exception,
  then only logging the error so the run's own exception is the one raised).
- Data parallel: every rank writes its own files and then a marker file ``.done-rank-<r>``
  (``.failed-rank-<r>`` with the error); rank 0 waits for all markers (up to the collective
  timeout), removes them, writes ``meta.json`` and publishes. The other ranks hold only their
  random state (~10 KB; the model and optimizer are rank 0's), so they write it on the training
  thread at once: no rank's checkpoint then depends on another process's background thread, which
  a framework holding the GIL inside a collective (jittor's MPI) could starve. Rank 0's background
  thread never calls a collective, so it cannot interleave with training's.
- A framework's own asynchronous save (``driver.io.start_async_write``: torch FSDP's sharded state
  through ``torch.distributed.checkpoint.async_save``) is started on every rank on the training
  thread; each rank's background thread waits for it before marking its files done, rank 0's
  before it writes ``meta.json`` and publishes.

Written once for every backend; a backend supplies only its ``snapshot.py`` (host copies).
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from fastcore_train import checkpoint as ckpt
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.persistence import HostSnapshot, Pending
from fastcore_train.log import logger
from fastcore_train.utils.atomic import begin_atomic, discard, flush_to_disk, make_durable, publish

DONE_MARKER = ".done-rank-{rank:05d}"
FAILED_MARKER = ".failed-rank-{rank:05d}"
_POLL_SECONDS = 0.02


class AsyncCheckpointError(RuntimeError):
    """A background checkpoint write failed; the previous checkpoint at its folder is unchanged."""


class AsyncCheckpointWriter:
    """Runs one background job at a time (a checkpoint write, or a blocking save's flush to disk),
    then the actions queued with :meth:`after`; keeps the job's error for the next :meth:`wait`."""

    def __init__(self) -> None:
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None
        self._target: Optional[Path] = None
        self._snapshot: Optional[HostSnapshot] = None
        self._lock = threading.Lock()
        self._then: list[Callable[[], None]] = []
        self._running = False  # a job's thread has not yet taken its last queued action (under _lock)

    def wait_for_snapshot(self) -> None:
        """Wait until the job in flight has taken its host copies (see :class:`HostSnapshot`);
        returns at once when there is none, or when they were taken before it started."""
        snapshot = self._snapshot
        if snapshot is not None:
            snapshot.ready.wait()

    def wait(self) -> None:
        """Wait for the job in flight (if any); raise :class:`AsyncCheckpointError` if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._snapshot = None
        error, self._error = self._error, None
        if error is not None:
            raise AsyncCheckpointError(
                f"The checkpoint to {str(self._target)!r} failed in the background: {type(error).__name__}: "
                f"{error}. If it was not published, the previous checkpoint there is unchanged; fix the cause "
                "(e.g. free disk space) and save again.") from error

    def start(self, target: Path, job: Callable[[], None], snapshot: Optional[HostSnapshot] = None) -> None:
        """Run ``job`` in a background thread, after waiting for the previous one; ``snapshot``:
        the host copies the job takes (what :meth:`wait_for_snapshot` waits for)."""
        self.wait()
        self._target = target
        self._snapshot = snapshot
        self._running = True

        def run() -> None:
            try:
                job()
            except BaseException as error:  # kept for the next wait(), never lost
                self._error = error
            finally:
                if snapshot is not None:
                    snapshot.ready.set()  # (never leave the training thread waiting on a failed copy)
            self._run_queued()

        # Not a daemon: an interpreter exiting after run() still finishes (and publishes) the write.
        self._thread = threading.Thread(target=run, name=f"fastcore-checkpoint-{target.name}", daemon=False)
        self._thread.start()

    def after(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the job in flight is done (on its thread), or now when none is.
        Its errors are logged, not raised (a cleanup must not stop training)."""
        with self._lock:
            if self._running:  # (a flag, not thread.is_alive(): a thread past its last check runs nothing more)
                self._then.append(action)
                return
        _run_logged(action)

    def _run_queued(self) -> None:
        while True:
            with self._lock:
                if not self._then:
                    self._running = False
                    return
                action = self._then.pop(0)
            _run_logged(action)


def _run_logged(action: Callable[[], None]) -> None:
    try:
        action()
    except Exception as error:  # noqa: BLE001 - a cleanup's failure is reported, not raised
        logger.warning("A checkpoint cleanup failed: %s: %s", type(error).__name__, error)


def flush_in_background(writer: AsyncCheckpointWriter, folder: Path, previous: list[Path]) -> None:
    """After a blocking save published ``folder``: flush it to disk on the writer's thread, then
    delete the versions it replaced (:func:`~fastcore_train.utils.atomic.make_durable`)."""
    writer.start(folder, lambda: make_durable(folder, previous))


@dataclasses.dataclass
class _Publication:
    """What the background thread needs to know of the ranks (read on the training thread)."""

    target: Path
    staging: Path
    rank: int
    world_size: int
    distributed: bool
    timeout: float
    #: The framework's own write in flight (``Persistence.start_async_write``), or None.
    pending: Optional[Pending] = None
    #: (only its file names are used in the background: which files of a replaced checkpoint are its own)
    driver: Optional[Driver] = None


def start_async_checkpoint(writer: AsyncCheckpointWriter, folder: Any, driver: Driver,
                           content_args: dict[str, Any]) -> None:
    """Snapshot this rank's part of a checkpoint and write it to ``folder`` in the background.

    Call on every rank (like :func:`~fastcore_train.checkpoint.write_checkpoint`, whose arguments
    ``content_args`` holds). Waits for the write in flight first (raising its error); the staging
    folder is made and shared with a collective here, on the training thread.
    """
    writer.wait()
    target = Path(folder)
    comm = driver.comm
    ckpt.check_snapshot_options(content_args.get("model_save_fn"), content_args.get("only_state_dict", True))
    staging = None
    if comm.is_global_zero():
        staging = begin_atomic(target, ckpt.check_checkpoint_target)
        staging.mkdir(parents=True)
    if comm.is_distributed():  # as for a blocking save: the folder is shared, and every rank is at this step
        staging = Path(comm.broadcast_object(None if staging is None else str(staging)))
        comm.barrier()  # (jittor: runs every rank's pending collective ops here, not in rank 0's snapshot alone)
    try:
        content = ckpt.checkpoint_content(driver, snapshot=True, **content_args)
        pending = _start_framework_write(driver, Path(staging))
    except BaseException:
        if comm.is_global_zero():
            discard(staging)
        raise
    facts = _Publication(target, Path(staging), comm.rank, comm.world_size, comm.is_distributed(),
                         float(getattr(comm, "timeout", 1800.0)), pending, driver)
    if comm.is_global_zero() or pending is not None:  # (every rank waits for its framework write in the background)
        writer.start(target, lambda: _write_and_publish(content, facts), content.snapshot)
    else:  # its own small files (the random state): written now, so no rank waits on another's thread
        _write_and_publish(content, facts)


def _write_and_publish(content: ckpt.CheckpointContent, facts: _Publication) -> None:
    """The background part: write this rank's files; rank 0 publishes once every rank is done."""
    zero = facts.rank == 0
    try:
        if facts.pending is not None:  # the framework's write into the same folder: over before ours
            facts.pending.result()
        content.write(facts.staging)
    except BaseException as error:
        if facts.distributed and not zero:
            _mark(facts.staging / FAILED_MARKER.format(rank=facts.rank), f"{type(error).__name__}: {error}")
        if zero:
            if facts.distributed:  # the others may still be writing into the folder: let them end first
                _wait_for_ranks(facts, settle=True)
            discard(facts.staging)
        raise
    if not zero:
        _mark(facts.staging / DONE_MARKER.format(rank=facts.rank), "")
        return
    try:
        if facts.distributed:
            _wait_for_ranks(facts)
        content.write_meta(facts.staging)
        ckpt.keep_user_files(facts.target, facts.staging, facts.driver)
        flush_to_disk(facts.staging)
        previous: list[Path] = []
        publish(facts.staging, facts.target, ckpt.check_checkpoint_target, previous)
        make_durable(facts.target, previous)
    finally:
        discard(facts.staging)  # (nothing is left to remove once published)


def _start_framework_write(driver: Driver, staging: Path) -> Optional[Pending]:
    """The hook: ``driver.io.start_async_write`` into the staging folder's model and state paths."""
    suffix = driver.io.model_file_suffix
    return driver.io.start_async_write(staging / f"{ckpt.MODEL_STEM}{suffix}",
                                       staging / f"{ckpt.TRAINING_STATE_STEM}{suffix}")


def _mark(path: Path, text: str) -> None:
    try:
        ckpt.write_text(path, text)
    except OSError as error:  # the staging folder may be gone; rank 0 then times out naming this rank
        logger.warning("Could not write checkpoint marker %r: %s", str(path), error)


def _wait_for_ranks(facts: _Publication, settle: bool = False) -> None:
    """Wait until every other rank has marked its files done; remove the markers. ``settle``:
    before the folder is removed, wait until each has marked done or failed, and raise nothing."""
    deadline = time.monotonic() + facts.timeout
    pending = set(range(1, facts.world_size))
    while pending:
        for rank in sorted(pending):
            failed = facts.staging / FAILED_MARKER.format(rank=rank)
            if failed.exists() and settle:
                pending.discard(rank)
            elif failed.exists():
                raise AsyncCheckpointError(f"rank {rank} could not write its checkpoint files: "
                                           f"{failed.read_text(encoding='utf-8')}")
            done = facts.staging / DONE_MARKER.format(rank=rank)
            if done.exists():
                os.remove(done)
                pending.discard(rank)
        if pending:
            if time.monotonic() > deadline:
                if settle:
                    return
                raise AsyncCheckpointError(
                    f"rank(s) {sorted(pending)} did not finish writing their checkpoint files within "
                    f"{facts.timeout:g} s (collective_timeout); the checkpoint was not published.")
            time.sleep(_POLL_SECONDS)
