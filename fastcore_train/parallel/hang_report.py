"""The words of a collective timeout, and the watcher process that says them when no thread can (issue 39).

:mod:`fastcore_train.parallel.watchdog` keeps the heartbeat table and its watchdog thread. A framework
waiting inside C++ may hold Python's GIL for as long as it waits (jittor's MPI all-reduce does, over a
lost host): no thread of the rank then runs, the watchdog's neither. So each watched rank also starts
this file as a small process (``python -I -S``: no imports beyond a few standard modules) that reads the
same table. It holds off while the rank's watchdog thread runs (the thread writes ``t`` into the watcher's
stdin at each look, ``g`` when it gives up and speaks) and, when the limit has passed and the thread has
not looked for ``GRACE`` seconds, writes the diagnosis itself (the ranks behind, from the table; the
other machines, probed as :mod:`fastcore_train.parallel.lost_hosts` does) and kills the rank. It ends
when its stdin closes (the rank stopped watching, or ended) or the rank is gone: it never outlives it.
The rank also tells it when a save or load starts (``B``) and ends (``b``): the longer limit then holds.

Only the standard library at the top: this file runs as a script.
"""
from __future__ import annotations

import os
import struct
import sys
import time
from typing import Optional, Sequence

#: Exit code of a rank the watchdog ends.
EXIT_CODE = 1
_SLOT = struct.Struct("<qd")  # progress key, time (time.monotonic: one clock for every process of a machine)
_PHASES = 8
#: Progress points, in the order every rank passes them for a batch (see :func:`progress_key`).
START, STEP, STOP_DECISION, EPOCH_END, EPOCH_STOP_DECISION, TRAIN_END = range(6)
_PLACES = {START: "the start of training", STEP: "the training step of batch {b}",
           STOP_DECISION: "the stop decision after batch {b}", EPOCH_END: "the end of the epoch after batch {b}",
           EPOCH_STOP_DECISION: "the stop decision after the epoch ending with batch {b}",
           TRAIN_END: "the end of training after batch {b}"}


def progress_key(batch: int, point: int) -> int:
    """A number that grows as a rank moves on: ``batch`` (global, 1-based) and the point within it."""
    return batch * _PHASES + point


def describe(key: int) -> str:
    """A progress key in words, e.g. "the stop decision after batch 4"."""
    batch, point = divmod(key, _PHASES)
    return _PLACES.get(point, "point {p} of batch {b}").format(b=batch, p=point)


def laggards(table: list[tuple[int, float]], ranks: Optional[Sequence[int]] = None) -> list[int]:
    """The ranks (of ``ranks``, by default all) behind the others (a lower progress key than the most
    advanced rank's)."""
    ranks = range(len(table)) if ranks is None else ranks
    ahead = max(table[rank][0] for rank in ranks)
    return [rank for rank in ranks if table[rank][0] < ahead]


def diagnosis(rank: int, timeout: float, table: Optional[list[tuple[int, float]]], where: str,
              ranks: Optional[Sequence[int]] = None, elsewhere: str = "",
              ending: str = f"exit code {EXIT_CODE}") -> str:
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
            here = "of this machine " if elsewhere else ""
            who = (f"Every rank {here}reached {describe(table[ranks[0]][0])}: none is "
                   "behind at the Trainer's progress points, so a rank is stuck inside that step (its model call, "
                   "backward, or user code, or a collective with another machine); each rank's report says where "
                   "its main thread is.")
        if elsewhere:
            who += " " + elsewhere
    return (f"{head} {who} This rank's main thread is at {where}. Ending the job ({ending}); raise "
            "collective_timeout if a step or an evaluation legitimately takes longer.")

#: Seconds without a look of the watchdog thread (past the limit) before the watcher speaks itself, and how
#: long it lets a thread that started to speak take before ending the rank anyway.
GRACE, SPEAKING = 2.0, 30.0


def _other_machines(places: list, master_address: Optional[str], rank: int) -> str:
    """lost_hosts.other_machines, loaded by path (this process has no package imports)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lost_hosts.py")
    spec = importlib.util.spec_from_file_location("_fastcore_lost_hosts", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    found = [module.Place(*place) for place in places]
    return module.other_machines(found[rank], found, master_address)


def _watch(table_fd: int, world_size: int, rank: int, ranks: list, timeout: float, busy_limit: float,
           parent: int, places: list, master_address: Optional[str]) -> None:
    import mmap
    import select
    import signal

    with os.fdopen(table_fd, "rb") as file:  # the rank's open table, inherited: its name may be gone
        table = mmap.mmap(file.fileno(), _SLOT.size * world_size, access=mmap.ACCESS_READ)
    interval, busy, speaking, tick = min(1.0, timeout / 10), False, None, time.monotonic()
    while True:
        if select.select([0], [], [], interval)[0]:
            said = os.read(0, 64)
            if not said:
                return  # the rank stopped watching, or ended
            for letter in said.decode("ascii", "replace"):
                busy = {"B": True, "b": False}.get(letter, busy)
                speaking = time.monotonic() if letter == "g" else speaking
                tick = time.monotonic() if letter == "t" else tick
        if os.getppid() != parent:
            return
        now = time.monotonic()
        if speaking is not None:
            if now - speaking > SPEAKING:
                os.kill(parent, signal.SIGKILL)
                return
            continue
        rows = [_SLOT.unpack_from(table, r * _SLOT.size) for r in range(world_size)]
        limit = max(timeout, busy_limit) if busy else timeout
        if now - max(rows[r][1] for r in ranks) <= limit + GRACE or now - tick <= GRACE:
            continue  # progress, or the watchdog thread still runs (it speaks)
        try:
            elsewhere = _other_machines(places, master_address, rank) if places else ""
        except Exception as error:  # never let the diagnosis keep the job from ending
            elsewhere = f"(the other machines could not be probed: {error!r})"
        where = ("a framework call that holds Python's GIL (no thread of the rank runs: this report comes from "
                 "its watcher process)")
        sys.stderr.write(diagnosis(rank, limit, rows if len(ranks) > 1 else None, where, ranks, elsewhere,
                                   "SIGKILL") + "\n")
        sys.stderr.flush()
        os.kill(parent, signal.SIGKILL)
        return


if __name__ == "__main__":
    import json

    _watch(**json.loads(sys.argv[1]))
