"""The collective timeout, written once for every backend: heartbeats and a watchdog per rank.

While ``Trainer.run`` trains data-parallel, every rank records where it is in a small table
shared by the ranks of the machine (a memory-mapped file, one slot per rank: a progress point
and the time it was reached). The Trainer marks the points every rank passes in the same order
(a batch's training step, the stop decision after it, an epoch's end); evaluation batches only
refresh the time. A watchdog thread per rank checks the table: when no rank of the machine has
moved for ``collective_timeout`` seconds (this one waiting for a peer in a collective, or stuck
itself, and none busy evaluating meanwhile), it names the ranks that are behind (those that did
not arrive where the others are), says where this rank's main thread is, and ends the process
with exit code 1 (``os._exit``: a thread cannot interrupt a collective). Every rank does the
same, so no rank hangs. A framework waiting in C++ with the GIL held keeps that thread from running
(jittor's MPI all-reduce over a lost host): a small watcher process per rank
(:mod:`~fastcore_train.parallel.hang_report`) then says it from the same table and kills the rank. In a job over several machines each machine has its own table (a machine is
a hostname and the link address toward the master: :mod:`fastcore_train.parallel.lost_hosts`), and a
rank that gives up names the other machines by address with their ranks, saying which ones no longer
answer (a host lost).

Saving and loading (:func:`keeps_alive`, around the Trainer's ``save_*``/``load_*``) are long
phases a rank cannot beat in (one framework call writing a large file): while a rank is in one,
its limit is :data:`BUSY_LIMIT` (or ``collective_timeout`` if longer), so a slow save on rank 0
is not a false timeout, and a save that never returns still ends the job. Before that phase a rank
waits for its own queued framework work under ``collective_timeout`` (``comm.settle()``): oneflow runs
the gradients' all-reduce later, so a lost peer is otherwise first waited for inside the save.

Frameworks with a timeout of their own (torch's process group, paddle's NCCL groups) get
:func:`framework_timeout` as a backstop for collectives outside ``Trainer.run``; it is longer
than ours (and than :data:`BUSY_LIMIT`, as a rank waits in a barrier during another's save) so
that ours, which names the rank, speaks first.
"""
from __future__ import annotations

import json
import logging
import mmap
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from functools import wraps
from typing import Any, Callable, Iterator, Optional, Sequence, TypeVar

from fastcore_train.log import logger
from fastcore_train.parallel import hang_report
from fastcore_train.parallel.hang_report import (  # noqa: F401 (the table's words, used by the Trainer and tests)
    _SLOT, EPOCH_END, EPOCH_STOP_DECISION, EXIT_CODE, START, STEP, STOP_DECISION, TRAIN_END, describe, diagnosis,
    laggards, progress_key)
from fastcore_train.parallel.lost_hosts import Place, here, machines, other_machines

#: Extra seconds a framework's own timeout gets over ``collective_timeout`` (see the module docstring).
FRAMEWORK_MARGIN = 60.0
#: Seconds a rank may spend saving or loading (:func:`keeps_alive`) without a heartbeat: the former
#: default collective timeout, so a slow save is never cut shorter than it was.
BUSY_LIMIT = 1800.0

def framework_timeout(collective_timeout: float) -> float:
    """The timeout to give a framework's own process group: ours (at least :data:`BUSY_LIMIT`, as a rank
    waits in a barrier while another saves) plus :data:`FRAMEWORK_MARGIN`."""
    return max(collective_timeout, BUSY_LIMIT) + FRAMEWORK_MARGIN


class Heartbeats:
    """The ranks' shared table of (progress key, time): ``path`` is a file of ``world_size`` slots."""

    def __init__(self, path: str, world_size: int, rank: int) -> None:
        self.path, self.world_size, self.rank = path, world_size, rank
        #: Kept open: the watcher process maps the table through this descriptor, so the file's name
        #: can go once every rank holds it (:func:`start_watchdog`).
        self.file = open(path, "r+b")
        self._map = mmap.mmap(self.file.fileno(), _SLOT.size * world_size)
        self._offset = rank * _SLOT.size
        self.key = -1
        #: How many saving or loading phases this rank is in (:meth:`busy`).
        self.busy_depth = 0
        #: Told ``b"B"``/``b"b"`` when a saving or loading phase starts and ends (the watcher process).
        self.notify: Callable[[bytes], None] = lambda said: None

    @staticmethod
    def create(path: str, world_size: int) -> None:
        with open(path, "wb") as file:
            file.write(b"\0" * _SLOT.size * world_size)

    def beat(self, key: int) -> None:
        """This rank reached progress point ``key`` now."""
        self.key = key
        _SLOT.pack_into(self._map, self._offset, key, time.monotonic())

    def touch(self) -> None:
        """This rank is busy and well (an evaluation batch): refresh the time only."""
        _SLOT.pack_into(self._map, self._offset, self.key, time.monotonic())

    @contextmanager
    def busy(self) -> Iterator[None]:
        """This rank saves or loads: a long phase without heartbeats (see :data:`BUSY_LIMIT`)."""
        self.busy_depth += 1
        if self.busy_depth == 1:
            self.notify(b"B")
        try:
            yield
        finally:
            self.busy_depth -= 1
            self.touch()
            if not self.busy_depth:
                self.notify(b"b")

    def last_beat(self) -> float:
        return _SLOT.unpack_from(self._map, self._offset)[1]

    def last_beat_of_any(self) -> float:
        """The latest heartbeat of any rank in the table (a rank evaluating keeps the ones waiting alive)."""
        return max(moment for _, moment in self.read())

    def read(self) -> list[tuple[int, float]]:
        return [_SLOT.unpack_from(self._map, rank * _SLOT.size) for rank in range(self.world_size)]


def _main_thread_place() -> str:
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return "an unknown place"
    last = traceback.extract_stack(frame)[-1]
    return f"{last.filename}:{last.lineno} in {last.name}"


class Watchdog:
    """A daemon thread ending this process when no rank of its machine moved for ``timeout``.

    ``ranks``: the ranks of this machine (whose heartbeats the table holds; by default all);
    ``places``: every rank's machine and ``master_address`` the job's, to name the other machines.
    """

    def __init__(self, heartbeats: Heartbeats, timeout: float, shared: bool,
                 ranks: Optional[Sequence[int]] = None, places: Sequence[Place] = (),
                 master_address: Optional[str] = None) -> None:
        self.heartbeats, self.timeout, self.shared = heartbeats, timeout, shared
        self.ranks = list(range(heartbeats.world_size)) if ranks is None else list(ranks)
        self.places, self.master_address = list(places), master_address
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fastcore-train-collective-timeout", daemon=True)
        self._watcher: Optional[subprocess.Popen] = None

    def start(self) -> "Watchdog":
        self.heartbeats.beat(progress_key(0, START))
        self._start_watcher()
        self._thread.start()
        return self

    def _start_watcher(self) -> None:
        """The watcher process (:mod:`~fastcore_train.parallel.hang_report`): it speaks when this thread cannot."""
        table = self.heartbeats.file.fileno()
        args = dict(table_fd=table, world_size=self.heartbeats.world_size, rank=self.heartbeats.rank,
                    ranks=self.ranks if self.shared else [self.heartbeats.rank], timeout=self.timeout,
                    busy_limit=BUSY_LIMIT, parent=os.getpid(), places=[list(vars(p).values()) for p in self.places],
                    master_address=self.master_address)
        try:
            self._watcher = subprocess.Popen([sys.executable, "-I", "-S", hang_report.__file__, json.dumps(args)],
                                             stdin=subprocess.PIPE, pass_fds=(table,))
        except OSError as error:  # the thread still watches
            logger.warning("the collective timeout's watcher process did not start (%s)", error)
            return
        self.heartbeats.notify = self._tell

    def _tell(self, said: bytes) -> None:
        watcher = self._watcher
        if watcher is not None and watcher.stdin is not None:
            try:
                os.write(watcher.stdin.fileno(), said)
            except (OSError, ValueError):
                pass

    def stop(self) -> None:
        """Stop watching (the end of ``Trainer.run``)."""
        self._stopped.set()
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            self.heartbeats.notify = lambda said: None
            watcher.stdin.close()  # type: ignore[union-attr]
            watcher.wait()
        self.heartbeats.file.close()

    def _watch(self) -> None:
        interval = min(1.0, self.timeout / 10)
        while not self._stopped.wait(interval):
            self._tell(b"t")
            if self.stuck_for() > self.limit():
                self._give_up()

    def limit(self) -> float:
        """Seconds this rank may go without progress now: ``timeout``, or :data:`BUSY_LIMIT` while it
        saves or loads."""
        return max(self.timeout, BUSY_LIMIT) if self.heartbeats.busy_depth else self.timeout

    def stuck_for(self) -> float:
        """Seconds since any rank of the machine moved (the table holds this machine's ranks only)."""
        latest = self.heartbeats.last_beat_of_any() if self.shared else self.heartbeats.last_beat()
        return time.monotonic() - latest

    def _give_up(self) -> None:
        self._tell(b"g")  # this thread speaks: the watcher holds off
        elsewhere = ""
        if self.places and len(self.places) > self.heartbeats.rank:
            try:  # a host lost: which other machines still answer (a few seconds at most)
                elsewhere = other_machines(self.places[self.heartbeats.rank], self.places, self.master_address)
            except Exception as error:  # never let the diagnosis keep the job from ending
                elsewhere = f"(the other machines could not be probed: {error!r})"
        table = self.heartbeats.read() if self.shared else None
        message = diagnosis(self.heartbeats.rank, self.limit(), table, _main_thread_place(), self.ranks, elsewhere)
        if logger.isEnabledFor(logging.ERROR) and logger.handlers:
            logger.error(message)
        else:
            sys.stderr.write(message + "\n")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_CODE)


def start_watchdog(comm: Any, timeout: float) -> Watchdog:
    """Set up the shared heartbeats of ``comm``'s ranks (a collective: every rank calls it) and watch.

    The ranks tell each other where they run (:func:`~fastcore_train.parallel.lost_hosts.here`); the
    lowest rank of each machine makes that machine's table in a new temporary folder, and the ranks
    learn its path in a second ``all_gather_object``. Once every rank and its watcher process hold the
    table open (a third), that rank removes the folder: a job that is killed leaves nothing in /tmp.
    """
    master_address = getattr(getattr(comm, "facts", None), "master_address", None)
    places = [Place(*place) for place in comm.all_gather_object(tuple(vars(here(master_address)).values()))]
    groups = machines(places)
    mine = groups[places[comm.rank]]
    folder = path = None
    if comm.rank == mine[0]:
        folder = tempfile.mkdtemp(prefix="fastcore-train-heartbeats-")
        path = os.path.join(folder, "heartbeats")
        Heartbeats.create(path, comm.world_size)
    try:
        paths = comm.all_gather_object(path)
        heartbeats = Heartbeats(paths[mine[0]], comm.world_size, comm.rank)
        watchdog = Watchdog(heartbeats, timeout, len(mine) > 1, mine, places if len(groups) > 1 else (),
                            master_address).start()
        comm.all_gather_object(None)  # every rank holds the table open: its name is no longer needed
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return watchdog


Method = TypeVar("Method", bound=Callable[..., Any])


def keeps_alive(method: Method) -> Method:
    """Mark a Trainer method (``save_checkpoint``, ``load_checkpoint``...) as a long phase without
    heartbeats: while it runs in a watched run, this rank's limit is :data:`BUSY_LIMIT`."""
    @wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        heartbeats = getattr(self.driver.comm, "heartbeats", None)
        if heartbeats is None:
            return method(self, *args, **kwargs)
        if not heartbeats.busy_depth:  # what the rank still waits for (oneflow's queued all-reduce) under its limit
            self.driver.comm.settle()
        with heartbeats.busy():
            return method(self, *args, **kwargs)
    return wrapper  # type: ignore[return-value]
