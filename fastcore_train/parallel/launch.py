"""Self-launching data-parallel workers from a plain ``python train.py``: written once for all backends.

When a driver is given several devices and no launcher started this process, rank 0 (this
process) re-runs the same command line once per other rank, with the rank described in
environment variables the backend chooses. Failure handling is the same for every backend:

- a worker that exits non-zero makes rank 0 stop every worker and exit non-zero (a watchdog
  thread, because rank 0 may be blocked in a collective operation), saying which rank ended and
  how (its exit code, or the signal that killed it: "rank 1 was killed by SIGKILL"); so does a
  worker that exits with code 0 in the middle of ``Trainer.run`` ("rank 1 (pid N) exited with code
  0 before the job finished", told by its run marker: :mod:`fastcore_train.parallel.run_markers`);
- a worker whose parent (rank 0) dies is killed by the kernel (``PR_SET_PDEATHSIG``);
- rank 0 raising kills the workers before the exception propagates.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Callable, NoReturn, Optional

from fastcore_train.log import logger
from fastcore_train.parallel.environment import LAUNCHED_RANK_ENV
from fastcore_train.parallel.rank_errors import record_failure
from fastcore_train.parallel.run_markers import RUN_MARKERS_ENV, ended_inside_run

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


def how_it_ended(returncode: int, early: bool = False) -> str:
    """A process's end in words: "exited with code 1", "was killed by SIGKILL"; ``early``: it ended
    inside ``Trainer.run`` ("exited with code 0 before the job finished")."""
    if returncode >= 0:
        return f"exited with code {returncode}{' before the job finished' if early else ''}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was killed by signal {-returncode}"


#: Seconds the watcher waits, once a worker has ended badly, for the ranks its end brings down, so
#: that the report names every rank that ended, the first one (the cause) first.
FAILURE_GRACE = 1.0


class WorkerGroup:
    """The worker processes rank 0 started (``ranks[i]`` is the rank of ``processes[i]``), watched until they end.

    A thread per process records when it ended; a watcher thread (rank 0 may be blocked in a
    collective) acts on the first bad end: it waits :data:`FAILURE_GRACE` for the ranks that fall
    with it (a framework often aborts a rank whose peer vanished), names every rank that ended
    badly in the order they ended, stops the rest and ends this process with exit code 1.

    Ending badly is a non-zero exit code, a signal, or exit code 0 while the rank's run marker in
    ``markers`` says it was inside ``Trainer.run`` (see :mod:`fastcore_train.parallel.run_markers`);
    the group removes ``markers`` when it is done. ``exit_on_failure=False``: no watcher thread;
    the caller acts on :meth:`failures` itself (a function job in a notebook's kernel).
    """

    def __init__(self, processes: list[subprocess.Popen], ranks: Optional[list[int]] = None,
                 markers: Optional[str] = None, exit_on_failure: bool = True) -> None:
        self.processes = processes
        self.ranks = list(ranks) if ranks is not None else list(range(1, len(processes) + 1))
        self.markers = markers
        self._stopping = False
        self._ended_at: dict[int, float] = {}  # index in processes -> time.monotonic() of its end
        self._an_end = threading.Event()
        self._giving_up = threading.Lock()
        for index, process in enumerate(processes):
            threading.Thread(target=self._wait_for, args=(index, process),
                             name=f"fastcore-train-rank-{self.ranks[index]}", daemon=True).start()
        if exit_on_failure:  # else the caller watches (a notebook's kernel must not exit)
            self._watchdog = threading.Thread(target=self._watch, name="fastcore-train-watchdog", daemon=True)
            self._watchdog.start()
            atexit.register(self._wait_at_exit)

    def _wait_for(self, index: int, process: subprocess.Popen) -> None:
        process.wait()
        self._ended_at[index] = time.monotonic()
        self._an_end.set()

    def _watch(self) -> None:
        while not self._stopping:
            self._an_end.wait(timeout=0.5)
            self._an_end.clear()
            if self._stopping or not self.failures():
                continue
            deadline = time.monotonic() + FAILURE_GRACE
            while time.monotonic() < deadline and any(process.poll() is None for process in self.processes):
                time.sleep(0.05)
            if self._stopping:
                return
            self.give_up()

    def give_up(self) -> NoReturn:
        """Name the ranks that ended badly, stop the others and end this process with exit code 1
        (once, whichever thread gets here first)."""
        with self._giving_up:
            if not self._stopping:
                logger.error("%s: stopping every rank.", self.failure_report())
                self.terminate()
            self.remove_markers()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

    def failures(self) -> list[str]:
        """How each worker that ended badly ended, naming its rank, the first to end first:
        "rank 1 (pid 42) was killed by SIGKILL"."""
        failed = [index for index, process in enumerate(self.processes)
                  if process.poll() not in (None, 0) or (process.returncode == 0 and self._early(index))]
        failed.sort(key=lambda index: self._ended_at.get(index, float("inf")))
        return [f"rank {self.ranks[index]} (pid {self.processes[index].pid}) "
                f"{how_it_ended(self.processes[index].returncode, self._early(index))}" for index in failed]

    def _early(self, index: int) -> bool:
        """Whether worker ``index`` ended inside ``Trainer.run`` (its run marker is still there)."""
        return ended_inside_run(self.markers, self.ranks[index])

    def wait_for_a_failure(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for a worker to end badly (what rank 0 saw may be its peer's end,
        a moment before the process is gone); whether one did."""
        deadline = time.monotonic() + seconds
        while not self.failures() and time.monotonic() < deadline:
            time.sleep(0.05)
        return bool(self.failures())

    def remove_markers(self) -> None:
        """Remove the run markers' folder (once the group is done with it)."""
        if self.markers is not None:
            shutil.rmtree(self.markers, ignore_errors=True)

    def failure_report(self) -> str:
        """:meth:`failures` in one sentence: the first bad end, then the ones that followed it."""
        failures = self.failures()
        if len(failures) < 2:
            return "".join(failures)
        return f"{failures[0]} first; then {'; '.join(failures[1:])}"

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
        self.remove_markers()

    def wait(self) -> None:
        """Wait for every worker to end (the watcher still acts on a bad end meanwhile)."""
        for process in self.processes:
            process.wait()

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
        self.remove_markers()


def start_worker(rank: int, env_for_rank: Callable[[int], dict[str, str]],
                 output_from_new_proc: str, markers: Optional[str] = None) -> subprocess.Popen:
    """Start rank ``rank`` running this process's command line (see :func:`spawn_workers`);
    ``markers``: the folder of the ranks' run markers."""
    env = {**os.environ, **env_for_rank(rank), LAUNCHED_RANK_ENV: str(rank)}
    if markers is not None:
        env[RUN_MARKERS_ENV] = markers
    stdout, stderr = _output_streams(output_from_new_proc, rank)
    return subprocess.Popen(command_line(), env=env, stdout=stdout, stderr=stderr, preexec_fn=_die_with_parent)


#: Seconds a rank that rendezvouses at import gets to open its rendezvous port before the others start anyway.
RENDEZVOUS_WAIT = 120.0


def wait_until_listening(address: str, process: Optional[subprocess.Popen], timeout: float = RENDEZVOUS_WAIT) -> None:
    """Wait until ``host:port`` accepts connections, ``process`` (the rank that opens it, when this process
    started it) has ended, or ``timeout`` has passed, whichever comes first (the framework reports the
    latter two itself)."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while (process is None or process.poll() is None) and time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)


def spawn_workers(world_size: int, env_for_rank: Callable[[int], dict[str, str]],
                  output_from_new_proc: str = "only_error", first_rank: int = 1,
                  rank_zero_output: Optional[str] = None, rendezvous: Optional[str] = None) -> WorkerGroup:
    """Start ranks first_rank..world_size-1 running this process's command line, watched as one group.

    ``output_from_new_proc``: ``"all"`` (workers print here), ``"ignore"`` (silence them),
    ``"only_error"`` (keep their stderr only), or a folder to write ``rank_N.log`` files into.
    ``first_rank=0`` starts rank 0 too, for frameworks whose rank cannot be set after import
    (this process then only supervises the workers); ``rank_zero_output`` is then its own choice.
    ``rendezvous`` (``host:port``): the first rank started opens it, and the others start once it
    accepts connections (oneflow's ranks meet when imported, and one that finds rank 0 not yet
    listening retries only 10 s later: half of all 2-rank starts took 10 s longer).
    """
    ranks = list(range(first_rank, world_size))
    markers = tempfile.mkdtemp(prefix="fastcore-train-run-markers-")
    processes = []
    for rank in ranks:
        processes.append(start_worker(rank, env_for_rank, rank_zero_output if rank == 0 and rank_zero_output
                                      else output_from_new_proc, markers))
        if rendezvous is not None and len(processes) == 1:
            wait_until_listening(rendezvous, processes[0])
    return WorkerGroup(processes, ranks, markers)


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
        # the cause, when what rank 0 saw is a collective failing ("Connection reset by peer")
        if workers.wait_for_a_failure(FAILURE_GRACE):
            logger.error("%s; stopping every rank.", workers.failure_report())
        workers.terminate()
        return
    reported_by_caller = record_failure(rank, exception)  # notebook_launcher's caller: the first failure first
    if isinstance(exception, KeyboardInterrupt) and not reported_by_caller:  # Ctrl-C or SIGTERM: no traceback
        sys.stderr.write(f"[rank {rank}] training stopped: {type(exception).__name__}"
                         f"{': ' + str(exception) if str(exception) else ''}\n")
    elif not reported_by_caller:
        sys.stderr.write(f"[rank {rank}] training failed:\n")
        traceback.print_exception(type(exception), exception, exception.__traceback__, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(getattr(exception, "exit_code", 1))  # a requeue's status (run_guard.TrainingRequeued), else 1
