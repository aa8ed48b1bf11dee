"""The messages between pytest and the ranks of a pool (pickled over a Unix socket), and the
variables that tell a rank where to connect."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

#: The pool's Unix socket (in a folder only this user can enter: no network port is opened).
SOCKET_ENV = "FASTCORE_TRAIN_POOL_SOCKET"
BACKEND_ENV = "FASTCORE_TRAIN_POOL_BACKEND"
WORLD_SIZE_ENV = "FASTCORE_TRAIN_POOL_WORLD_SIZE"


@dataclass
class Task:
    """Run ``target`` ("module:function") with ``args``/``kwargs`` on every rank, in ``folder``."""

    target: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    folder: str = ""
    #: A set-up body: what it changes is the pool's state from now on, not a leftover.
    setup: bool = False


@dataclass
class Reply:
    """One rank's answer: the body's return value or its traceback, and what it left behind."""

    rank: int
    value: Any = None
    error: Optional[str] = None
    seconds: float = 0.0
    #: Changes the rank put back (environment variables, working directory, signal handlers, ...).
    restored: list[str] = field(default_factory=list)
    #: Changes it could not put back (threads, file descriptors, child processes, process groups).
    dirty: list[str] = field(default_factory=list)
