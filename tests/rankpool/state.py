"""What a test body may leave behind in a pool rank, and putting back what can be put back.

Before each body the rank takes a :class:`ProcessState`; after it, :func:`leftovers` compares. What
can be restored exactly (environment variables, the working directory, signal handlers, ``sys.path``,
logging handlers, the temporary folder) is put back and reported as *restored*; what cannot (threads
still running, open file descriptors, child processes, process groups the framework holds) is
reported as *dirty*, and the pool gives the next body fresh ranks.
"""
from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

#: Seconds a body's threads get to end after it returned (a watchdog polls its stop event each second).
THREAD_GRACE = 2.0
_UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}
_LOGGERS = ("", "fastcore_train")


def _signal_handlers() -> dict[int, object]:
    return {int(number): signal.getsignal(number) for number in signal.valid_signals()
            if number not in _UNCATCHABLE}


def _open_descriptors() -> dict[int, str]:
    """Each open file descriptor with what it points at (``/proc/self/fd``)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the descriptor listdir itself used, closed meanwhile
            continue
    return found


def _children() -> set[int]:
    """Processes whose parent is this one (Linux ``/proc``)."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


@dataclass
class ProcessState:
    """The parts of a process a body can change; see the module docstring."""

    environ: dict[str, str]
    cwd: str
    handlers: dict[int, object]
    sys_path: list[str]
    log_handlers: dict[str, list[logging.Handler]]
    tempdir: object
    threads: dict[int, threading.Thread] = field(repr=False)
    descriptors: dict[int, str]
    children: set[int]
    groups: list[str]

    @classmethod
    def capture(cls, groups: Callable[[], list[str]]) -> "ProcessState":
        gc.collect()  # objects of the last body that hold descriptors (an mmap, a socket) go now
        return cls(environ=dict(os.environ), cwd=os.getcwd(), handlers=_signal_handlers(), sys_path=list(sys.path),
                   log_handlers={name: list(logging.getLogger(name).handlers) for name in _LOGGERS},
                   tempdir=tempfile.tempdir, threads={t.ident: t for t in threading.enumerate()},
                   descriptors=_open_descriptors(), children=_children(), groups=groups())


def _wait_for_new_threads(before: ProcessState) -> None:
    deadline = time.monotonic() + THREAD_GRACE
    for thread in threading.enumerate():
        if thread.ident not in before.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def leftovers(before: ProcessState, groups: Callable[[], list[str]],
              ignore_descriptors: set[int] = frozenset()) -> tuple[list[str], list[str]]:
    """Compare with ``before``: ``(restored, dirty)``, each a list of sentences. Restorable changes
    are put back here; dirty ones need a fresh process."""
    gc.collect()  # first: a collected object may stop its thread (a dataloader's reader, say)
    _wait_for_new_threads(before)
    after = ProcessState.capture(groups)
    restored, dirty = [], []

    changed = sorted(set(before.environ) ^ set(after.environ) |
                     {key for key in before.environ.keys() & after.environ.keys()
                      if before.environ[key] != after.environ[key]})
    if changed:
        restored.append(f"environment variables {', '.join(changed)} changed")
        os.environ.clear()
        os.environ.update(before.environ)
    if after.cwd != before.cwd:
        restored.append(f"working directory changed to {after.cwd}")
        os.chdir(before.cwd)
    for number, handler in before.handlers.items():
        if after.handlers.get(number) is not handler and after.handlers.get(number) != handler:
            name = signal.Signals(number).name
            if handler is None:  # installed outside Python: cannot be put back
                dirty.append(f"the {name} handler changed")
                continue
            restored.append(f"the {name} handler changed")
            signal.signal(number, handler)
    if after.sys_path != before.sys_path:
        restored.append("sys.path changed")
        sys.path[:] = before.sys_path
    for name, handlers in before.log_handlers.items():
        if after.log_handlers[name] != handlers:
            restored.append(f"the handlers of logger {name or 'root'!r} changed")
            logging.getLogger(name).handlers[:] = handlers
    if after.tempdir != before.tempdir:
        restored.append("tempfile.tempdir changed")
        tempfile.tempdir = before.tempdir  # type: ignore[assignment]

    dirty += [f"thread {thread.name!r} still running" for ident, thread in after.threads.items()
              if ident not in before.threads and thread.is_alive()]
    dirty += [f"file descriptor {fd} ({target}) left open" for fd, target in sorted(after.descriptors.items())
              if fd not in ignore_descriptors and before.descriptors.get(fd) != target]
    dirty += [f"child process {pid} left running" for pid in sorted(after.children - before.children)]
    new_groups = [group for group in after.groups if group not in before.groups]
    gone_groups = [group for group in before.groups if group not in after.groups]
    dirty += [f"process group {group} created" for group in new_groups]
    dirty += [f"process group {group} destroyed" for group in gone_groups]
    return restored, dirty
