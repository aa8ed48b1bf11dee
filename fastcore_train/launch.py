"""Self-launching data-parallel workers from a plain ``python train.py``: written once for all backends.

When a driver is given several devices and no launcher started this process, rank 0 (this
process) re-runs the same command line once per other rank, with the rank described in
environment variables the backend chooses. Failure handling is the same for every backend:

- a worker that exits non-zero makes rank 0 stop every worker and exit non-zero (a watchdog
  thread, because rank 0 may be blocked in a collective operation), saying which rank ended and
  how (its exit code, or the signal that killed it: "rank 1 was killed by SIGKILL");
- a worker whose parent (rank 0) dies is killed by the kernel (``PR_SET_PDEATHSIG``);
- rank 0 raising kills the workers before the exception propagates.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import Callable, Optional

from fastcore_train.log import logger
from fastcore_train.parallel.environment import LAUNCHED_RANK_ENV

OUTPUT_CHOICES = ("all", "ignore", "only_error")


def check_output_choice(output_from_new_proc: object) -> str:
    """Validate ``output_from_new_proc``: one of :data:`OUTPUT_CHOICES` or a folder for per-rank logs."""
    if isinstance(output_from_new_proc, os.PathLike) or (
            isinstance(output_from_new_proc, str) and output_from_new_proc.strip()):
        return os.fspath(output_from_new_proc)
    raise ValueError(f"output_from_new_proc must be one of {OUTPUT_CHOICES} or a folder path for "
                     f"rank_<N>.log files, got {output_from_new_proc!r}.")


def redirect_own_output(output_from_new_proc: str, rank: int) -> None:
    """Apply ``output_from_new_proc`` to this worker process itself, at the file-descriptor level.

    For launchers that start every rank themselves (mpirun re-running the script): the worker
    rank silences or files its own stdout/stderr, as :func:`spawn_workers` does for the workers
    it starts. Rank 0 and ``"all"`` keep the terminal.
    """
    choice = check_output_choice(output_from_new_proc)
    if rank == 0 or choice == "all":
        return
    sys.stdout.flush()
    sys.stderr.flush()
    if choice in ("ignore", "only_error"):
        target = os.open(os.devnull, os.O_WRONLY)
        os.dup2(target, 1)
        if choice == "ignore":
            os.dup2(target, 2)
    else:
        os.makedirs(choice, exist_ok=True)
        target = os.open(os.path.join(choice, f"rank_{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, 1)
        os.dup2(target, 2)
    os.close(target)


def launched_by_us() -> bool:
    return LAUNCHED_RANK_ENV in os.environ


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``, for a rendezvous of self-launched ranks."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def command_line() -> list[str]:
    """The command that started this interpreter, to start the other ranks the same way."""
    original = getattr(sys, "orig_argv", None)
    if original:
        return [sys.executable, *original[1:]]
    return [sys.executable, *sys.argv]


def _die_with_parent() -> None:
    """In a worker: ask the kernel to kill us when the launching process dies (Linux)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def how_it_ended(returncode: int) -> str:
    """A process's end in words: "exited with code 1", "was killed by SIGKILL"."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was killed by signal {-returncode}"


class WorkerGroup:
    """The worker processes rank 0 started (``ranks[i]`` is the rank of ``processes[i]``), watched until they end."""

    def __init__(self, processes: list[subprocess.Popen], ranks: Optional[list[int]] = None) -> None:
        self.processes = processes
        self.ranks = list(ranks) if ranks is not None else list(range(1, len(processes) + 1))
        self._stopping = False
        self._watchdog = threading.Thread(target=self._watch, name="fastcore-train-watchdog", daemon=True)
        self._watchdog.start()
        atexit.register(self._wait_at_exit)

    def _watch(self) -> None:
        while not self._stopping:
            failures = self.failures()
            if failures and not self._stopping:
                logger.error("%s: stopping every rank.", "; ".join(failures))
                self.terminate()
                sys.stderr.flush()
                os._exit(1)
            time.sleep(0.2)

    def failures(self) -> list[str]:
        """How each worker that ended badly ended, naming its rank: "rank 1 (pid 42) was killed by SIGKILL"."""
        return [f"rank {rank} (pid {process.pid}) {how_it_ended(process.returncode)}"
                for rank, process in zip(self.ranks, self.processes) if process.poll() not in (None, 0)]

    def send_signal(self, signum: int) -> None:
        """Pass ``signum`` on to every worker still running (a SIGTERM rank 0 received, say)."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signum)

    def terminate(self) -> None:
        """Stop every worker now (SIGTERM, then SIGKILL after 5 s)."""
        self._stopping = True
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 5
        for process in self.processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()

    def _wait_at_exit(self) -> None:
        if self._stopping:
            return
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                logger.error("Worker %d did not finish within 60 s of rank 0; killing it.", process.pid)
                process.kill()
        self._stopping = True


def spawn_workers(world_size: int, env_for_rank: Callable[[int], dict[str, str]],
                  output_from_new_proc: str = "only_error", first_rank: int = 1) -> WorkerGroup:
    """Start ranks first_rank..world_size-1 running this process's command line.

    ``output_from_new_proc``: ``"all"`` (workers print here), ``"ignore"`` (silence them),
    ``"only_error"`` (keep their stderr only), or a folder to write ``rank_N.log`` files into.
    ``first_rank=0`` starts rank 0 too, for frameworks whose rank cannot be set after import
    (this process then only supervises the workers).
    """
    processes = []
    for rank in range(first_rank, world_size):
        env = {**os.environ, **env_for_rank(rank), LAUNCHED_RANK_ENV: str(rank)}
        stdout, stderr = _output_streams(output_from_new_proc, rank)
        processes.append(subprocess.Popen(command_line(), env=env, stdout=stdout, stderr=stderr,
                                          preexec_fn=_die_with_parent))
    return WorkerGroup(processes, list(range(first_rank, world_size)))


def _output_streams(choice: str, rank: int) -> tuple[Optional[object], Optional[object]]:
    if choice == "all":
        return None, None
    if choice == "ignore":
        return subprocess.DEVNULL, subprocess.DEVNULL
    if choice == "only_error":
        return subprocess.DEVNULL, None
    os.makedirs(choice, exist_ok=True)
    log = open(os.path.join(choice, f"rank_{rank}.log"), "w", encoding="utf-8")
    return log, subprocess.STDOUT


def stop_job_after_failure(rank: int, exception: BaseException, workers: Optional[WorkerGroup] = None) -> None:
    """Make sure no rank waits forever in a collective for one that failed.

    The self-launching rank 0 stops its workers and lets the exception propagate. Any other rank
    (ours, or a framework launcher's) reports and leaves at once; its launcher stops the rest.
    """
    if workers is not None:
        failures = workers.failures()
        if failures:  # the cause, when what rank 0 saw is a collective failing ("Connection closed by peer")
            logger.error("%s; stopping every rank.", "; ".join(failures))
        workers.terminate()
        return
    if isinstance(exception, KeyboardInterrupt):  # Ctrl-C or SIGTERM: no traceback to read
        sys.stderr.write(f"[rank {rank}] training stopped: {type(exception).__name__}"
                         f"{': ' + str(exception) if str(exception) else ''}\n")
    else:
        sys.stderr.write(f"[rank {rank}] training failed:\n")
        traceback.print_exception(type(exception), exception, exception.__traceback__, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)
