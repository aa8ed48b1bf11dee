"""Running a multi-process job from a test: its whole process tree ends with it, even on timeout."""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Callable, Optional

import pytest


def run_process_tree(command: list[str], timeout: float, env: Optional[dict[str, str]] = None,
                     cwd: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run ``command`` to its end in a session of its own; on timeout kill every process it started
    (ranks, launchers, compilers) and fail the test with its last output."""
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True, env=env, cwd=cwd)
    try:
        stdout, stderr = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        stdout, stderr = job.communicate()
        pytest.fail(f"{' '.join(command[:3])} did not end within {timeout} s:\n{stderr[-4000:]}")
    return subprocess.CompletedProcess(command, job.returncode, stdout, stderr)


def default_sigint() -> None:
    """``preexec_fn`` for a job a test sends Ctrl-C (SIGINT): the child takes it as Python does by default
    (KeyboardInterrupt), even when this process was started with SIGINT ignored, as a non-interactive
    shell starts a background job (and Python then keeps it ignored in every child)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def read_line(stream: IO[str], timeout: float) -> str:
    """The next line of a job's output, or a failed test when none comes within ``timeout`` (a plain
    ``readline`` would wait for good if the job never prints it)."""
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"the job printed no line within {timeout} s")


def wait_until(condition: Callable[[], object], timeout: float, what: str, every: float = 0.05) -> None:
    """Poll ``condition`` until it holds (instead of sleeping a fixed time); fail the test naming ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(every)


def files_matching(folder: Path, pattern: str) -> Callable[[], list[Path]]:
    """A condition for :func:`wait_until`: the files under ``folder`` matching ``pattern`` (recursive)."""
    return lambda: list(Path(folder).glob(pattern))

