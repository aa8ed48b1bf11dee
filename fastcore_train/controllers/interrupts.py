"""Ctrl-C while a checkpoint is written: finish it, or abandon it cleanly on a second press.

The first Ctrl-C stops training and ``CheckpointCallback(on_exceptions=KeyboardInterrupt)`` saves
its exception checkpoint. People press Ctrl-C again, impatiently: before, that second
``KeyboardInterrupt`` landed inside the framework's writer (torch's "unexpected pos"
``RuntimeError``) and the run ended with no exception checkpoint. :class:`ExceptionSaveGuard`
holds SIGINT while that save runs:

- the next Ctrl-C is deferred: the save goes on, and a warning says so and how to abandon it;
- the one after abandons the save: a ``KeyboardInterrupt`` is raised inside it, the atomic write
  removes its temporary (nothing is published; earlier checkpoints are untouched), the error
  the framework makes of it is replaced by one warning, and the run goes on stopping as after
  the first Ctrl-C.

A regular checkpoint (``stop_after=True``) is guarded the same way, so that a Ctrl-C landing in
its write is not turned into the framework's error (torch's "unexpected pos" ``RuntimeError``, which
``on_exceptions=KeyboardInterrupt`` does not match): the save completes, then ``KeyboardInterrupt``
is raised and training stops as after any Ctrl-C; a second press abandons it and stops at once.

Only the main thread can handle signals, so elsewhere the guard does nothing.
"""
from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any, Optional

from fastcore_train.log import logger


class SaveAbandoned(KeyboardInterrupt):
    """Ctrl-C was pressed again while a checkpoint was being written: the save stops."""


class SaveGuard:
    """Defers Ctrl-C during the save of ``what``; ``stop_after``: raise ``KeyboardInterrupt`` once the
    save is done if Ctrl-C was pressed meanwhile (a regular checkpoint; see the module docstring)."""

    def __init__(self, what: str, stop_after: bool = False) -> None:
        self.what = what
        self.stop_after = stop_after
        self.kind = "regular" if stop_after else "exception"
        self.presses = 0
        self.abandoned = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> "SaveGuard":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def _on_sigint(self, signum: int, frame: Optional[FrameType]) -> None:
        self.presses += 1
        if self.presses == 1:
            logger.warning("Ctrl-C: saving the %s checkpoint %s first, so that it is complete%s; press Ctrl-C "
                           "again to abandon it (nothing of it is kept; earlier checkpoints stay as they are).",
                           self.kind, self.what,
                           ", then training stops" if self.stop_after else "")
        elif not self.abandoned:  # later presses must not interrupt the removal of the temporary
            self.abandoned = True
            raise SaveAbandoned(f"the checkpoint {self.what} was abandoned (Ctrl-C pressed again)")

    def __exit__(self, kind: Optional[type], error: Optional[BaseException],
                 trace: Optional[TracebackType]) -> bool:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
        if self.abandoned:
            # The interruption (or what the framework's writer made of it, e.g. torch's "unexpected pos"
            # RuntimeError) is the abandon asked for: reported once, and the run goes on stopping.
            logger.warning("Abandoned the %s checkpoint %s (Ctrl-C pressed again during its save): nothing of it "
                           "was kept; earlier checkpoints are intact.", self.kind, self.what)
            if self.stop_after:
                raise KeyboardInterrupt(f"Ctrl-C during the save of {self.what}, which was abandoned") from None
            return True
        if self.presses and self.stop_after and error is None:
            raise KeyboardInterrupt(f"Ctrl-C during the save of {self.what}, which was completed first")
        return False
