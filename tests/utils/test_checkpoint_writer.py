"""The background checkpoint writer (framework-free): one job at a time, and the actions queued
after a job (deleting checkpoints it replaces) always run, however the timing falls."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from fastcore_train.checkpoint.async_writer import AsyncCheckpointError, AsyncCheckpointWriter


def test_an_action_queued_while_a_job_runs_runs_after_it():
    writer, order = AsyncCheckpointWriter(), []
    release = threading.Event()
    writer.start(Path("job"), lambda: (release.wait(5), order.append("job")))
    writer.after(lambda: order.append("after"))
    assert order == []
    release.set()
    writer.wait()
    assert order == ["job", "after"]


def test_an_action_with_no_job_runs_at_once():
    writer, order = AsyncCheckpointWriter(), []
    writer.after(lambda: order.append("now"))
    assert order == ["now"]


def test_no_queued_action_is_lost_when_it_comes_as_the_job_ends():
    writer, ran = AsyncCheckpointWriter(), []
    for index in range(300):
        writer.start(Path(f"job{index}"), lambda: None)
        if index % 2:
            time.sleep(0.0001)  # vary where in the job's ending the action comes
        writer.after(lambda index=index: ran.append(index))
    writer.wait()
    deadline = time.monotonic() + 5
    while len(ran) < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(ran) == list(range(300))


def test_a_failed_job_is_raised_once_and_its_queued_action_still_runs():
    writer, ran = AsyncCheckpointWriter(), []

    def fail():
        raise OSError(28, "No space left on device")

    writer.start(Path("job"), fail)
    writer.after(lambda: ran.append(True))
    with pytest.raises(AsyncCheckpointError, match="No space left on device"):
        writer.wait()
    writer.wait()
    assert ran == [True]
