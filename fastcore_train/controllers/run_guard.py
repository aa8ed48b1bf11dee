"""What keeps a ``Trainer.run`` from hanging or dying without a checkpoint, on every rank alike.

:class:`RunGuard` is entered for the duration of a run:

- **SIGTERM is Ctrl-C** (what schedulers, Kubernetes and ``timeout`` send): while the run lasts,
  SIGTERM only asks to stop (the previous handler is back afterwards). The request is honoured at
  the next optimizer step as :class:`TrainingTerminated`, a ``KeyboardInterrupt``, so it takes
  Ctrl-C's path: ``on_exception`` listeners run (``CheckpointCallback(on_exceptions=...)`` saves
  its exception checkpoint) and the driver stops the job. A self-launching rank 0 forwards the
  signal to the ranks it started.
- **A requeue signal saves, then exits for a restart** (``CheckpointCallback(requeue_signal=...)``,
  e.g. SLURM's ``--signal=USR1@90`` or Kubernetes' SIGTERM): the signal only asks; at the next
  stop decision every rank raises :class:`TrainingRequeued` after the same batch, that callback
  saves a regular checkpoint there (``run(resume_from="auto")`` finds it), and the process exits
  with :data:`REQUEUE_EXIT_CODE`, which schedulers read as "stopped, start me again".
- **Stopping is collective**: in data parallel, at optimizer steps (every one, or every ``k``
  where steps are tiny; see :meth:`RunGuard.decide_stop_after_step`) and at every epoch's end the
  ranks sum their stop, SIGTERM and requeue requests (``driver.comm.sum_over_ranks``), so a
  ``stop_training()`` or a SIGTERM on any rank stops every rank after the same batch.
- **A collective timeout**: in data parallel a watchdog (:mod:`fastcore_train.parallel.watchdog`)
  ends the job, naming the rank that did not arrive, when a rank makes no progress for
  ``collective_timeout`` seconds.
"""
from __future__ import annotations

import math
import signal
import threading
import time
from types import FrameType, TracebackType
from typing import Any, Optional, Sequence

from fastcore_train.drivers.driver import Driver
from fastcore_train.log import logger
from fastcore_train.parallel.run_markers import RunMarker
from fastcore_train.parallel.watchdog import STOP_DECISION, Watchdog, progress_key, start_watchdog


#: The share of training time the per-step stop exchange may take (see ``RunGuard.decide_stop_after_step``).
EXCHANGE_BUDGET = 0.01
#: The most optimizer steps between two exchanges.
MAX_INTERVAL = 64
#: The exit status after a requeue signal's checkpoint: 128 + SIGTERM, what a process ended by
#: SIGTERM reports. Kubeflow's ``restartPolicy: ExitCode`` retries 128-255 (1-127 are permanent
#: errors), torchrun restarts on any non-zero status, and an sbatch script tests for it to
#: ``scontrol requeue`` (docs/multinode.md).
REQUEUE_EXIT_CODE = 143


class TrainingTerminated(KeyboardInterrupt):
    """SIGTERM arrived during ``Trainer.run``: raised at an optimizer step, on every rank at the same one.

    A ``KeyboardInterrupt``, so that whatever handles Ctrl-C (``catch_KeyboardInterrupt``,
    ``CheckpointCallback(on_exceptions=KeyboardInterrupt)``) handles it too.
    """


class TrainingRequeued(KeyboardInterrupt):
    """A requeue signal (``CheckpointCallback(requeue_signal=...)``) arrived during ``Trainer.run``:
    raised after the same batch on every rank; the run saves, then exits with :attr:`exit_code`."""

    exit_code = REQUEUE_EXIT_CODE


class RunGuard:
    """Entered by ``Trainer.run``; see the module docstring."""

    def __init__(self, driver: Driver, requeue_signals: Sequence[int] = ()) -> None:
        self.driver = driver
        #: Signals that ask for a checkpoint and a requeue exit (SIGTERM among them replaces its Ctrl-C meaning).
        self.requeue_signals = tuple(requeue_signals)
        #: Set by a requeue signal; read like ``terminate_requested``.
        self.requeue_requested = False
        self._previous_requeue: dict[int, Any] = {}
        self.comm = driver.comm
        #: Whether the stop decision and heartbeats involve other ranks.
        self.distributed = self.comm.is_distributed() and self.comm.world_size > 1
        #: Set by SIGTERM; read by the loop at each optimizer step.
        self.terminate_requested = False
        self._watchdog: Optional[Watchdog] = None
        # The per-step exchange: every _interval optimizer steps (agreed by all ranks), this rank's
        # proposal for the next interval, and when the last exchange ended.
        self._interval = self._countdown = self._proposal = 1
        self._last_exchange: Optional[float] = None
        self._previous: Any = None
        self._installed = False
        self._acted_on_sigterm = False
        self._marker = RunMarker(self.comm.rank)

    # ------------------------------------------------------------------ entering and leaving a run
    def __enter__(self) -> "RunGuard":
        self._marker.__enter__()  # a rank leaving before run() ends is then a failure its launcher names
        if threading.current_thread() is threading.main_thread():  # Python runs handlers there only
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._installed = True
            for number in self.requeue_signals:  # after SIGTERM's: a requeue SIGTERM replaces it
                self._previous_requeue[number] = signal.signal(number, self._on_requeue_signal)
        if self.distributed:
            self._watchdog = start_watchdog(self.comm, self.comm.timeout)
            self.comm.heartbeats = self._watchdog.heartbeats
        return self

    def __exit__(self, kind: Optional[type], error: Optional[BaseException], trace: Optional[TracebackType]) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
            self.comm.heartbeats = self._watchdog = None
        self._marker.__exit__(kind, error, trace)  # run() has ended on this rank
        if self._installed:
            for number, previous in reversed(list(self._previous_requeue.items())):
                signal.signal(number, previous)
            self._previous_requeue.clear()
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False
            if self.terminate_requested and not self._acted_on_sigterm and error is None:
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

    def _on_requeue_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        if not self.requeue_requested:
            logger.warning("%s received: every rank saves a checkpoint after the next batch, then the job exits with "
                           "status %d (requeue).", signal.Signals(signum).name, REQUEUE_EXIT_CODE)
        self.requeue_requested = True

    @property
    def interrupt_requested(self) -> bool:
        """Whether this rank got SIGTERM or a requeue signal (one process acts on it at once)."""
        return self.terminate_requested or self.requeue_requested

    # ------------------------------------------------------------------ the loop's calls
    def beat(self, batch: int, point: int) -> None:
        """This rank reached progress point ``point`` of global batch ``batch`` (a no-op in one process)."""
        if self._watchdog is not None:
            self._watchdog.heartbeats.beat(progress_key(batch, point))

    def decide_stop_after_step(self, requested: bool, batch: int) -> bool:
        """The decision after an optimizer step of data parallel: every rank stops at the same step.

        The ranks exchange their requests every ``k`` optimizer steps (and at every epoch's end),
        ``k`` agreed by all: 1 while a step is long next to the exchange (one small all-reduce),
        larger where steps are tiny, so that the exchange costs about :data:`EXCHANGE_BUDGET` of
        the training time; a request then waits at most ``k`` steps (``k`` <= :data:`MAX_INTERVAL`).
        """
        self._countdown -= 1
        if self._countdown > 0:
            return False
        self.beat(batch, STOP_DECISION)
        started = time.perf_counter()
        sums = self.comm.sum_over_ranks([requested, self.terminate_requested, self._proposal, self.requeue_requested])
        ended = time.perf_counter()
        if self._last_exchange is not None:
            step = (started - self._last_exchange) / self._interval
            self._proposal = min(MAX_INTERVAL, max(1, math.ceil((ended - started) / (EXCHANGE_BUDGET * step))))
        self._last_exchange = ended
        self._interval = self._countdown = max(1, -(-sums[2] // self.comm.world_size))  # alike on every rank
        return self._act_on([sums[0], sums[1], sums[3]], batch)

    def decide_stop(self, requested: bool, batch: int, point: int) -> bool:
        """Whether every rank stops now (an epoch's end): any rank's ``requested`` (``stop_training()``)
        stops all; any rank's SIGTERM raises :class:`TrainingTerminated` on all, and any rank's
        requeue signal :class:`TrainingRequeued`."""
        flags = [requested, self.terminate_requested, self.requeue_requested]
        if self.distributed:
            self.beat(batch, point)
            flags = self.comm.sum_over_ranks(flags)
            self._countdown, self._last_exchange = self._interval, None
        return self._act_on(flags, batch)

    def _act_on(self, flags: list[int], batch: int) -> bool:
        """Raise :class:`TrainingRequeued` when a rank got a requeue signal, :class:`TrainingTerminated`
        when one got SIGTERM; else whether a rank asked to stop. ``flags``: stop, SIGTERM, requeue."""
        where = 'this or another rank' if self.distributed else 'this process'
        if flags[2]:
            raise TrainingRequeued(f"a requeue signal was received on {where}; training stopped after batch {batch} "
                                   f"to save a checkpoint and exit with status {REQUEUE_EXIT_CODE}.")
        if flags[1]:
            self._acted_on_sigterm = True
            raise TrainingTerminated(f"SIGTERM received on {'this or another rank' if self.distributed else 'this process'}; "
                                     f"training stopped after batch {batch}.")
        return bool(flags[0])
