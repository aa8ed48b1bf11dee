"""One rank of a rank pool: started by the framework's launcher, it runs the test bodies pytest sends
until told to stop (see :mod:`tests.rankpool.pool`).

Each body runs in a folder of its own (its working directory and temporary folder), with this
rank's stdout and stderr written to ``rank_<r>.stdout``/``.stderr`` there. Afterwards the rank
compares its state with the state before the body (:mod:`tests.rankpool.state`), puts back what
can be put back and tells pytest what could not. SIGUSR2 makes the rank print every thread's stack
(pytest sends it to a body that outlived its timeout, before it ends the ranks).
"""
from __future__ import annotations

import faulthandler
import importlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Iterator, Optional

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.rankpool.frameworks import RANK_VARIABLES, body_context, process_groups, settle, warm_up  # noqa: E402
from tests.rankpool.protocol import BACKEND_ENV, SOCKET_ENV, WORLD_SIZE_ENV, Reply, Task  # noqa: E402
from tests.rankpool.state import ProcessState, leftovers  # noqa: E402


def launcher_rank() -> int:
    """This rank, as its launcher gave it (0 for a plain process)."""
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


@contextmanager
def output_into(folder: Path, rank: int) -> Iterator[None]:
    """This process's stdout and stderr (file descriptors 1 and 2, so also what the framework's C++
    prints) go to ``folder/rank_<r>.stdout`` and ``.stderr`` while the body runs."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    for fd, suffix in ((1, "stdout"), (2, "stderr")):
        target = os.open(folder / f"rank_{rank}.{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in zip((1, 2), saved):
            os.dup2(original, fd)
            os.close(original)


def resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


def run_task(task: Task, rank: int, backend: Optional[str], keep: set[int]) -> Reply:
    """Run one body in its folder and report its result, its time and what it left behind."""
    folder = Path(task.folder)
    scratch = folder / f"tmp_rank_{rank}"
    scratch.mkdir(parents=True, exist_ok=True)
    home, temporary = os.getcwd(), (tempfile.tempdir, os.environ.get("TMPDIR"))
    os.chdir(folder)
    tempfile.tempdir, os.environ["TMPDIR"] = str(scratch), str(scratch)
    groups = lambda: process_groups(backend)  # noqa: E731
    before = ProcessState.capture(groups)
    started = time.monotonic()
    value, error = None, None
    with output_into(folder, rank):
        try:
            with body_context(backend):
                value = resolve(task.target)(*task.args, **task.kwargs)
        except BaseException:  # a failed assertion, SystemExit, KeyboardInterrupt: the test's failure
            error = traceback.format_exc()
        try:
            settle(backend)
        except Exception:  # the pool's own failure: the test shows it, and the ranks are replaced
            error = (error or "") + "while the pool settled the framework after the body:\n" + traceback.format_exc()
    seconds = time.monotonic() - started
    restored, dirty = leftovers(before, groups, keep) if not task.setup else ([], [])
    os.chdir(home)
    tempfile.tempdir = temporary[0]
    if temporary[1] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = temporary[1]
    left = sorted(path.name for path in scratch.iterdir())
    if left:
        restored.append(f"files left in the temporary folder: {', '.join(left[:5])}{' ...' if len(left) > 5 else ''}")
    shutil.rmtree(scratch, ignore_errors=True)
    return Reply(rank=rank, value=value, error=error, seconds=seconds, restored=restored, dirty=dirty)


def main() -> None:
    backend, world_size = os.environ[BACKEND_ENV] or None, int(os.environ[WORLD_SIZE_ENV])
    rank = launcher_rank()
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ[SOCKET_ENV])
    connection = Connection(sock.detach())
    connection.send({"rank": rank, "pid": os.getpid()})
    keep = {connection.fileno()}
    if backend is not None:
        warm_up(backend, world_size)
    connection.send("ready")
    while True:
        task = connection.recv()
        if task is None:
            break
        reply = run_task(task, rank, backend, keep)
        try:
            connection.send(reply)
        except Exception as error:  # a return value that does not pickle
            reply.value, reply.error = None, f"the body's return value could not be sent: {error!r}"
            connection.send(reply)
    connection.close()


if __name__ == "__main__":
    main()
