"""Running a multi-process job from a test: its whole process tree ends with it, even on timeout."""
from __future__ import annotations

import os
import signal
import subprocess
from typing import Optional

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
