"""Running a function, not a command line, on the ranks of a local data-parallel job.

What :func:`fastcore_train.notebook_launcher` (and ``fastcore_train.launch``) run on, written once
for every backend. The function and its arguments are pickled with cloudpickle (so functions and
classes defined in a notebook or at a script's top level travel by value) into a job folder; each
rank is a fresh interpreter running :mod:`fastcore_train.parallel.run_function` with the rank's
launcher variables set, exactly as a self-launched rank gets them, so ``Trainer(device=None)``
inside the function joins the job as it would under torchrun. A backend that needs ``mpirun``
(jittor) has the same entry run under ``mpirun -np N``.

The caller is never a rank: it only starts, watches and stops them, so a notebook's kernel keeps
no process group, no framework state of the job and no sockets, and lives on whatever the ranks
do. A rank that fails is raised here as :class:`RankFailedError` naming the rank, with the first
error's message (every other rank is stopped first); rank 0's return value is returned.
"""
from __future__ import annotations

import collections
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Optional, Sequence

from fastcore_train.log import INFO_TO_STDOUT_ENV, in_a_notebook
from fastcore_train.parallel.environment import LAUNCHED_RANK_ENV
from fastcore_train.parallel.launch import FAILURE_GRACE, WorkerGroup, check_output_choice, wait_until_listening
from fastcore_train.parallel.launcher import MPI_INSTALL_HINT, MpirunReexec, find_mpirun
from fastcore_train.parallel.rank_errors import FUNCTION_JOB_ENV, PARENT_ENV, RankFailedError, read_failures
from fastcore_train.parallel.run_markers import RUN_MARKERS_ENV

PAYLOAD = "payload.pkl"
RESULT = "result.pkl"
#: The module each rank runs (``python -m``).
ENTRY = "fastcore_train.parallel.run_function"


def _cloudpickle() -> Any:
    try:
        import cloudpickle
    except ImportError as missing:  # a core dependency; only a broken install gets here
        raise ImportError("notebook_launcher needs cloudpickle to send the function to its ranks: "
                          "pip install cloudpickle") from missing
    return cloudpickle


def write_payload(folder: str, function: Callable[..., Any], args: Sequence[Any], backend_module: Optional[str],
                  output_from_new_proc: str) -> None:
    """Pickle what every rank runs into ``folder``; a clear error when something will not pickle."""
    # A plain header first: the rank imports the backend before unpickling what may import its framework.
    header = pickle.dumps({"backend_module": backend_module, "output_from_new_proc": output_from_new_proc})
    try:
        data = header + _cloudpickle().dumps((function, tuple(args)))
    except Exception as error:
        raise TypeError(f"notebook_launcher could not pickle the function or its arguments for the ranks "
                        f"({type(error).__name__}: {error}); pass plain data (arrays, paths, numbers) and build "
                        "models and dataloaders inside the function.") from error
    Path(folder, PAYLOAD).write_bytes(data)


def _worker_environment(folder: str, markers: Optional[str]) -> dict[str, str]:
    """This process's environment for the ranks, with the job folder, and this interpreter's
    ``sys.path`` (a notebook may have added folders) where modules pickled by name are found."""
    env = dict(os.environ)
    if env.get("MPLBACKEND", "").startswith("module://"):  # the kernel's inline backend means nothing in a rank
        env.pop("MPLBACKEND")
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path for path in [os.getcwd(), *sys.path] if path))
    env[FUNCTION_JOB_ENV] = folder
    env[PARENT_ENV] = str(os.getpid())
    if in_a_notebook():  # the ranks' INFO lines reach the cell as stdout, not as red stderr
        env[INFO_TO_STDOUT_ENV] = "1"
    if markers is not None:
        env[RUN_MARKERS_ENV] = markers
    return env


def _relay(stream: IO[bytes], target: Callable[[], IO[str]], tail: collections.deque) -> None:
    """Copy a rank's output to ``target()`` (this process's sys.stdout/stderr: a notebook's cell)."""
    for line in iter(stream.readline, b""):
        text = line.decode("utf-8", "replace")
        tail.append(text)
        try:
            target().write(text)
            target().flush()
        except (OSError, ValueError):
            pass
    stream.close()


class _Outputs:
    """Where each rank's stdout/stderr goes, per ``output_from_new_proc``; relay threads for piped ones."""

    def __init__(self, choice: str) -> None:
        self.choice = choice
        self.threads: list[threading.Thread] = []
        self.tails: dict[int, collections.deque] = {}
        self.files: list[IO] = []

    def streams(self, rank: int) -> tuple[Any, Any]:
        choice = "all" if rank == 0 else self.choice
        if choice == "ignore":
            return subprocess.DEVNULL, subprocess.DEVNULL
        if choice in ("all", "only_error"):
            return (subprocess.PIPE if choice == "all" else subprocess.DEVNULL), subprocess.PIPE
        os.makedirs(choice, exist_ok=True)
        log = open(os.path.join(choice, f"rank_{rank}.log"), "w", encoding="utf-8")
        self.files.append(log)
        return log, subprocess.STDOUT

    def follow(self, rank: int, process: subprocess.Popen) -> None:
        tail = self.tails.setdefault(rank, collections.deque(maxlen=40))
        for stream, target in ((process.stdout, lambda: sys.stdout), (process.stderr, lambda: sys.stderr)):
            if stream is not None:
                thread = threading.Thread(target=_relay, args=(stream, target, tail), daemon=True,
                                          name=f"fastcore-train-rank-{rank}-output")
                thread.start()
                self.threads.append(thread)

    def close(self) -> None:
        for thread in self.threads:
            thread.join(timeout=5)
        for log in self.files:
            log.close()


def _failure_error(folder: str, failures: list[str], fallback: str) -> RankFailedError:
    """The error the caller sees: the first recorded exception, naming its rank; else how the
    first rank ended (``failures``), else ``fallback``."""
    records = read_failures(folder)
    if records:
        first = records[0]
        also = [f"rank {record['rank']}" for record in records[1:]]
        message = (f"rank {first['rank']} failed: {first['type']}: {first['message']}"
                   + (f" (then {', '.join(also)} stopped too)" if also else "")
                   + f"\n\nRank {first['rank']}'s traceback:\n{first['traceback']}")
        if len(records) > 1:  # what the first failure brought down, folded under it: one line each
            message += "\nThe other ranks stopped because of it:\n" + "\n".join(
                f"  rank {record['rank']}: {record['type']}: {_first_line(record['message'])}" for record in records[1:])
        return RankFailedError(message, first["rank"], first["traceback"])
    text = failures[0] if failures else fallback
    rank = int(text.split()[1]) if text.startswith("rank ") else None
    return RankFailedError(f"{'; '.join(failures) or fallback}; every rank was stopped.", rank)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:197] + "..."


def _read_result(folder: str) -> Any:
    path = Path(folder, RESULT)
    return _cloudpickle().loads(path.read_bytes()) if path.exists() else None


def run_on_ranks(function: Callable[..., Any], args: Sequence[Any], rank_variables: Sequence[dict[str, str]],
                 backend_module: Optional[str] = None, output_from_new_proc: str = "only_error",
                 rendezvous: Optional[str] = None) -> Any:
    """Run ``function(*args)`` in one new process per entry of ``rank_variables`` (rank ``r`` gets
    ``rank_variables[r]`` set), wait for all, and return rank 0's result. ``rendezvous`` (``host:port``):
    rank 0 opens it when its framework is imported, and the others start once it listens there
    (see :func:`~fastcore_train.parallel.launch.spawn_workers`).

    ``backend_module`` is imported in each rank before the function is unpickled (a backend that
    chooses its framework's settings before the framework's first import). On a failure the other
    ranks are stopped and :class:`RankFailedError` is raised; Ctrl-C (a notebook's interrupt)
    stops every rank and propagates.
    """
    output_from_new_proc = check_output_choice(output_from_new_proc)
    folder = tempfile.mkdtemp(prefix="fastcore-train-function-job-")
    markers = os.path.join(folder, "markers")
    os.makedirs(markers)
    outputs = _Outputs(output_from_new_proc)
    group: Optional[WorkerGroup] = None
    try:
        write_payload(folder, function, args, backend_module, output_from_new_proc)
        base = _worker_environment(folder, markers)
        processes = []
        for rank, variables in enumerate(rank_variables):
            stdout, stderr = outputs.streams(rank)
            env = {**base, **variables, LAUNCHED_RANK_ENV: str(rank)}
            # No preexec_fn: Python code between fork and exec can deadlock in a threaded process (a
            # notebook's kernel); the rank asks to die with this process itself (run_function).
            process = subprocess.Popen([sys.executable, "-m", ENTRY, folder], env=env, stdout=stdout, stderr=stderr)
            processes.append(process)
            outputs.follow(rank, process)
            if rendezvous is not None and rank == 0:
                wait_until_listening(rendezvous, process)
        group = WorkerGroup(processes, list(range(len(processes))), markers, exit_on_failure=False)
        while any(process.poll() is None for process in processes) and not group.failures():
            time.sleep(0.05)
        if group.failures():
            deadline = time.monotonic() + FAILURE_GRACE  # the ranks its end brings down, for the report
            while time.monotonic() < deadline and any(process.poll() is None for process in processes):
                time.sleep(0.05)
            failures = group.failures()
            group.terminate()
            outputs.close()
            raise _failure_error(folder, failures, "a rank failed")
        outputs.close()
        return _read_result(folder)
    finally:
        if group is not None:
            group.terminate()  # a no-op once every rank ended; stops them after Ctrl-C
        shutil.rmtree(folder, ignore_errors=True)


def run_under_mpirun(function: Callable[..., Any], args: Sequence[Any], world_size: int,
                     backend_module: Optional[str] = None, output_from_new_proc: str = "only_error") -> Any:
    """:func:`run_on_ranks` for MPI frameworks: ``mpirun -np world_size`` runs the same entry
    (each rank reads its rank from Open MPI and applies ``output_from_new_proc`` itself)."""
    output_from_new_proc = check_output_choice(output_from_new_proc)
    mpirun = find_mpirun()
    if mpirun is None:
        raise RuntimeError(f"notebook_launcher runs this framework's {world_size} ranks under mpirun, which was not "
                           f"found (in {os.path.join(sys.prefix, 'bin')} or on PATH): {MPI_INSTALL_HINT}.")
    folder = tempfile.mkdtemp(prefix="fastcore-train-function-job-")
    outputs = _Outputs("all")
    process: Optional[subprocess.Popen] = None
    try:
        write_payload(folder, function, args, backend_module, output_from_new_proc)
        env = {**MpirunReexec(world_size).environment(), **_worker_environment(folder, None)}
        command = [mpirun, "-np", str(world_size), sys.executable, "-m", ENTRY, folder]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        outputs.follow(0, process)
        returncode = process.wait()
        outputs.close()
        if returncode != 0:
            raise _failure_error(folder, [], f"mpirun (pid {process.pid}) exited with code {returncode}")
        return _read_result(folder)
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)
