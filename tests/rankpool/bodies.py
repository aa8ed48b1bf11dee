"""Bodies the pool's own tests send to the ranks: each misbehaves in one way (fails, hangs, dies, leaves
state behind) so that the tests can show the body after it still runs on clean ranks."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from tests.rankpool.frameworks import process_groups
from tests.rankpool.worker import launcher_rank

LEFTOVER_VARIABLE = "FASTCORE_TRAIN_POOL_LEFTOVER"


def who_am_i(backend: Optional[str] = None) -> dict:
    """This rank's pid, and what a misbehaving body may have left here."""
    return {"rank": launcher_rank(), "pid": os.getpid(), "leftover_variable": os.environ.get(LEFTOVER_VARIABLE),
            "groups": process_groups(backend), "sys.path": list(sys.path),
            "threads": sorted(thread.name for thread in threading.enumerate() if thread.name.startswith("leftover")),
            "sigusr1": repr(signal.getsignal(signal.SIGUSR1)), "root handlers": len(logging.getLogger().handlers),
            "kept": len(_KEPT)}


def fail_on(rank: int) -> None:
    if launcher_rank() == rank:
        raise ValueError(f"boom from rank {rank}")


def hang_on(rank: int) -> None:
    if launcher_rank() == rank:
        sleep_for_good()


def sleep_for_good() -> None:
    time.sleep(100000)


def die_on(rank: int) -> None:
    if launcher_rank() == rank:
        os._exit(3)


#: What :func:`leave_behind` can leave, and whether the pool puts it back (else: fresh ranks).
LEFTOVERS = {"environment variable": True, "signal handler": True, "working directory": True, "sys.path": True,
             "logging handler": True, "temporary file": True, "thread": False, "file descriptor": False,
             "child process": False, "process group": False}
_KEPT = []  # what a body holds on to after it returned (an open file), as a leaking body would


def unpicklable():
    """A return value that cannot travel back to pytest."""
    return lambda: None


def leave_behind(backend: Optional[str], *leftovers: str) -> None:
    """Leave each of ``leftovers`` (keys of :data:`LEFTOVERS`) in this rank."""
    for what in leftovers:
        _leave(backend, what)


def _leave(backend: Optional[str], what: str) -> None:
    if what == "environment variable":
        os.environ[LEFTOVER_VARIABLE] = "1"
    elif what == "signal handler":
        signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    elif what == "working directory":
        os.chdir("/")
    elif what == "sys.path":
        sys.path.append("/leftover")
    elif what == "logging handler":
        logging.getLogger().addHandler(logging.NullHandler())
    elif what == "temporary file":
        os.close(tempfile.mkstemp()[0])
    elif what == "thread":
        threading.Thread(target=sleep_for_good, name="leftover-thread", daemon=True).start()
    elif what == "file descriptor":
        _KEPT.append(open(os.devnull))
    elif what == "child process":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    elif what == "process group":
        new_group(backend)
    else:
        raise ValueError(what)


def new_group(backend: Optional[str]) -> None:
    """A second process group of both ranks, made with the framework's own call."""
    if backend == "torch":
        import torch.distributed as dist

        dist.new_group([0, 1])
    elif backend == "paddle":
        import paddle.distributed as dist

        dist.new_group([0, 1])
    else:
        raise ValueError(f"{backend} has no call that makes another process group")
