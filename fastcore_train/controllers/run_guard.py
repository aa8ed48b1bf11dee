"""What keeps a ``Trainer.run`` from hanging or dying without a checkpoint, on every rank alike.

:class:`RunGuard` is entered for the duration of a run:

- **SIGTERM is Ctrl-C** (what schedulers, Kubernetes and ``timeout`` send): while the run lasts,
  SIGTERM only asks to stop (the previous handler is back afterwards). The request is honoured at
  the next optimizer step as :class:`TrainingTerminated`, a ``KeyboardInterrupt``, so it takes
  Ctrl-C's path: ``on_exception`` listeners run (``CheckpointCallback(on_exceptions=...)`` saves
  its exception checkpoint) and the driver stops the job. A self-launching rank 0 forwards the
  signal to the ranks it started.
- **Stopping is collective**: in data parallel, every optimizer step (and every epoch's end) the
  ranks OR their stop and SIGTERM requests (``driver.comm.any_rank``), so a ``stop_training()``
  or a SIGTERM on any rank stops every rank after the same batch.
- **A collective timeout**: in data parallel a watchdog (:mod:`fastcore_train.parallel.watchdog`)
  ends the job, naming the rank that did not arrive, when a rank makes no progress for
  ``collective_timeout`` seconds.
"""
from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any, Optional

from fastcore_train.drivers.driver import Driver
from fastcore_train.log import logger
from fastcore_train.parallel.watchdog import Watchdog, progress_key, start_watchdog


class TrainingTerminated(KeyboardInterrupt):
    """SIGTERM arrived during ``Trainer.run``: raised at an optimizer step, on every rank at the same one.

    A ``KeyboardInterrupt``, so that whatever handles Ctrl-C (``catch_KeyboardInterrupt``,
    ``CheckpointCallback(on_exceptions=KeyboardInterrupt)``) handles it too.
    """


class RunGuard:
    """Entered by ``Trainer.run``; see the module docstring."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.comm = driver.comm
        #: Whether the stop decision and heartbeats involve other ranks.
        self.distributed = self.comm.is_distributed() and self.comm.world_size > 1
        #: Set by SIGTERM; read by the loop at each optimizer step.
        self.terminate_requested = False
        self._watchdog: Optional[Watchdog] = None
        self._previous: Any = None
        self._installed = False

    # ------------------------------------------------------------------ entering and leaving a run
    def __enter__(self) -> "RunGuard":
        if threading.current_thread() is threading.main_thread():  # Python runs handlers there only
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._installed = True
        if self.distributed:
            self._watchdog = start_watchdog(self.comm, self.comm.timeout)
            self.comm.heartbeats = self._watchdog.heartbeats
        return self

    def __exit__(self, kind: Optional[type], error: Optional[BaseException], trace: Optional[TracebackType]) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
            self.comm.heartbeats = self._watchdog = None
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False
            if self.terminate_requested and error is None:
                # The run ended before an optimizer step could act on it: whoever handled SIGTERM before gets it.
                signal.raise_signal(signal.SIGTERM)

    def _on_sigterm(self, signum: int, frame: Optional[FrameType]) -> None:
        if not self.terminate_requested:
            logger.warning("SIGTERM received: training stops at the next optimizer step, as after Ctrl-C "
                           "(on_exception listeners run, then the job ends).")
        self.terminate_requested = True
        workers = getattr(self.driver.launcher, "workers", None)
        if workers is not None:  # a self-launched rank 0: the ranks it started hear it too
            workers.send_signal(signal.SIGTERM)

    # ------------------------------------------------------------------ the loop's calls
    def beat(self, batch: int, point: int) -> None:
        """This rank reached progress point ``point`` of global batch ``batch`` (a no-op in one process)."""
        if self._watchdog is not None:
            self._watchdog.heartbeats.beat(progress_key(batch, point))

    def decide_stop(self, requested: bool, batch: int, point: int) -> bool:
        """Whether every rank stops now: any rank's ``requested`` (``stop_training()``) stops all; any
        rank's SIGTERM raises :class:`TrainingTerminated` on all. One small all-reduce in data parallel."""
        flags: tuple[bool, ...] = (requested, self.terminate_requested)
        if self.distributed:
            self.beat(batch, point)
            flags = self.comm.any_rank(flags)
        if flags[1]:
            raise TrainingTerminated(f"SIGTERM received on {'this or another rank' if self.distributed else 'this process'}; "
                                     f"training stopped after batch {batch}.")
        return flags[0]
