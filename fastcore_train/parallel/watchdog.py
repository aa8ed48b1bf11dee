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
same, so no rank hangs. In a job over several machines each machine has its own table (a machine is
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

import logging
import mmap
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from functools import wraps
from typing import Any, Callable, Iterator, Optional, Sequence, TypeVar

from fastcore_train.log import logger
from fastcore_train.parallel.lost_hosts import Place, here, machines, other_machines

#: Exit code of a rank the watchdog ends.
EXIT_CODE = 1
#: Extra seconds a framework's own timeout gets over ``collective_timeout`` (see the module docstring).
FRAMEWORK_MARGIN = 60.0
#: Seconds a rank may spend saving or loading (:func:`keeps_alive`) without a heartbeat: the former
#: default collective timeout, so a slow save is never cut shorter than it was.
BUSY_LIMIT = 1800.0

_SLOT = struct.Struct("<qd")  # progress key, time (time.monotonic: one clock for every process of a machine)
_PHASES = 8
#: Progress points, in the order every rank passes them for a batch (see :func:`progress_key`).
START, STEP, STOP_DECISION, EPOCH_END, EPOCH_STOP_DECISION, TRAIN_END = range(6)
_PLACES = {START: "the start of training", STEP: "the training step of batch {b}",
           STOP_DECISION: "the stop decision after batch {b}", EPOCH_END: "the end of the epoch after batch {b}",
           EPOCH_STOP_DECISION: "the stop decision after the epoch ending with batch {b}",
           TRAIN_END: "the end of training after batch {b}"}


def framework_timeout(collective_timeout: float) -> float:
    """The timeout to give a framework's own process group: ours (at least :data:`BUSY_LIMIT`, as a rank
    waits in a barrier while another saves) plus :data:`FRAMEWORK_MARGIN`."""
    return max(collective_timeout, BUSY_LIMIT) + FRAMEWORK_MARGIN


def progress_key(batch: int, point: int) -> int:
    """A number that grows as a rank moves on: ``batch`` (global, 1-based) and the point within it."""
    return batch * _PHASES + point


def describe(key: int) -> str:
    """A progress key in words, e.g. "the stop decision after batch 4"."""
    batch, point = divmod(key, _PHASES)
    return _PLACES.get(point, "point {p} of batch {b}").format(b=batch, p=point)


class Heartbeats:
    """The ranks' shared table of (progress key, time): ``path`` is a file of ``world_size`` slots."""

    def __init__(self, path: str, world_size: int, rank: int) -> None:
        self.path, self.world_size, self.rank = path, world_size, rank
        with open(path, "r+b") as file:
            self._map = mmap.mmap(file.fileno(), _SLOT.size * world_size)
        self._offset = rank * _SLOT.size
        self.key = -1
        #: How many saving or loading phases this rank is in (:meth:`busy`).
        self.busy_depth = 0

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
        try:
            yield
        finally:
            self.busy_depth -= 1
            self.touch()

    def last_beat(self) -> float:
        return _SLOT.unpack_from(self._map, self._offset)[1]

    def last_beat_of_any(self) -> float:
        """The latest heartbeat of any rank in the table (a rank evaluating keeps the ones waiting alive)."""
        return max(moment for _, moment in self.read())

    def read(self) -> list[tuple[int, float]]:
        return [_SLOT.unpack_from(self._map, rank * _SLOT.size) for rank in range(self.world_size)]


def laggards(table: list[tuple[int, float]], ranks: Optional[Sequence[int]] = None) -> list[int]:
    """The ranks (of ``ranks``, by default all) behind the others (a lower progress key than the most
    advanced rank's)."""
    ranks = range(len(table)) if ranks is None else ranks
    ahead = max(table[rank][0] for rank in ranks)
    return [rank for rank in ranks if table[rank][0] < ahead]


def diagnosis(rank: int, timeout: float, table: Optional[list[tuple[int, float]]], where: str,
              ranks: Optional[Sequence[int]] = None, elsewhere: str = "") -> str:
    """What the watchdog of ``rank`` says when it gives up: who did not arrive, and where this rank is.

    ``table`` holds the heartbeats of ``ranks`` (this machine's; by default every rank's); ``elsewhere``
    what this rank found about the job's other machines (:func:`~fastcore_train.parallel.lost_hosts.other_machines`).
    """
    head = (f"[rank {rank}] collective timeout: this rank made no progress for {timeout:g} s "
            f"(collective_timeout={timeout:g}).")
    ranks = list(range(len(table))) if ranks is None and table is not None else ranks
    if table is None or not ranks or len(ranks) == 1:
        who = elsewhere or "The other ranks run on other machines, so this rank cannot tell which one is behind."
    else:
        behind = laggards(table, ranks)
        now = time.monotonic()
        if behind:
            ahead = max(table[r][0] for r in ranks)
            waiting = [r for r in ranks if r not in behind]
            who = "; ".join(f"Rank {r} did not arrive: it is still at {describe(table[r][0])} "
                            f"(reached {now - table[r][1]:.1f} s ago)" for r in behind)
            who += (f"; rank{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting))} reached "
                    f"{describe(ahead)}.")
        else:
            who = (f"Every rank {'of this machine ' if elsewhere else ''}reached {describe(table[ranks[0]][0])}: none is "
                   "behind at the Trainer's progress points, so a rank is stuck inside that step (its model call, "
                   "backward, or user code, or a collective with another machine); each rank's report says where "
                   "its main thread is.")
        if elsewhere:
            who += " " + elsewhere
    return (f"{head} {who} This rank's main thread is at {where}. Ending the job (exit code {EXIT_CODE}); raise "
            "collective_timeout if a step or an evaluation legitimately takes longer.")


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

    def __init__(self, heartbeats: Heartbeats, timeout: float, shared: bool, folder: Optional[str],
                 ranks: Optional[Sequence[int]] = None, places: Sequence[Place] = (),
                 master_address: Optional[str] = None) -> None:
        self.heartbeats, self.timeout, self.shared, self.folder = heartbeats, timeout, shared, folder
        self.ranks = list(range(heartbeats.world_size)) if ranks is None else list(ranks)
        self.places, self.master_address = list(places), master_address
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fastcore-train-collective-timeout", daemon=True)

    def start(self) -> "Watchdog":
        self.heartbeats.beat(progress_key(0, START))
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (the end of ``Trainer.run``); the rank that made the table removes it."""
        self._stopped.set()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _watch(self) -> None:
        interval = min(1.0, self.timeout / 10)
        while not self._stopped.wait(interval):
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
    learn its path in a second ``all_gather_object``.
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
    paths = comm.all_gather_object(path)
    heartbeats = Heartbeats(paths[mine[0]], comm.world_size, comm.rank)
    return Watchdog(heartbeats, timeout, len(mine) > 1, folder, mine, places if len(groups) > 1 else (),
                    master_address).start()


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
