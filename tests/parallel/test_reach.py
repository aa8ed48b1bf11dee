"""Reaching a job's master (fastcore_train/parallel/reach.py) on this machine's loopback: a listening
master is reached at once, a port nobody listens on is a clear error after the timeout with notices
meanwhile, and a name that does not resolve fails at once. Across hosts: tests/distributed/test_master_unreachable.py."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fastcore_train.parallel import reach

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_master_that_listens_is_reached_at_once():
    with socket.socket() as master:
        master.bind(("127.0.0.1", 0))
        master.listen()
        start = time.monotonic()
        reach.wait_for_master("127.0.0.1", master.getsockname()[1], rank=1, timeout=5, say=pytest.fail)
        assert time.monotonic() - start < 5


def test_a_master_that_starts_late_is_waited_for():
    port, said = free_port(), []
    master = socket.socket()

    def listen_later() -> None:
        time.sleep(0.4)
        master.bind(("127.0.0.1", port))
        master.listen()

    later = threading.Thread(target=listen_later)
    later.start()
    try:
        reach.wait_for_master("127.0.0.1", port, rank=1, timeout=10, say=said.append)
    finally:
        later.join()
        master.close()
    assert said == []  # a short wait is not worth a word


def test_nobody_listening_is_a_clear_error_after_the_timeout_with_notices_meanwhile():
    port, said = free_port(), []
    start = time.monotonic()
    with pytest.raises(reach.MasterUnreachableError) as raised:
        reach.wait_for_master("127.0.0.1", port, rank=3, timeout=1.2, say=said.append)
    assert 1.2 <= time.monotonic() - start < 10
    text = str(raised.value)
    assert f"rank 3 could not reach the job's master at 127.0.0.1:{port}" in text
    assert "connection refused" in text and "interface lo" in text and "MASTER_PORT" in text
    assert said and f"still waiting for the job's master at 127.0.0.1:{port}" in said[0]


def test_a_name_that_does_not_resolve_fails_at_once():
    start = time.monotonic()
    with pytest.raises(reach.MasterUnreachableError, match="MASTER_ADDR='no-such-host.invalid' does not resolve"):
        reach.wait_for_master("no-such-host.invalid", 29500, rank=1, timeout=60)
    assert time.monotonic() - start < 10


def test_a_join_past_its_timeout_ends_the_process_saying_why():
    code = ("import time; from fastcore_train.parallel.reach import joined_within\n"
            "with joined_within(0.5, 'rank 0 waited: the others never came'):\n"
            "    time.sleep(30)\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == -signal.SIGKILL and time.monotonic() - start < 10
    assert done.stderr == "rank 0 waited: the others never came\n"


def test_a_join_in_time_leaves_no_word_and_no_watcher():
    code = ("import os, time; from fastcore_train.parallel.reach import joined_within\n"
            "with joined_within(30, 'never said'):\n"
            "    time.sleep(0.2)\n"
            "print(repr(open(f'/proc/self/task/{os.getpid()}/children').read()))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.strip() == "''", done.stdout  # the watcher is gone with the block
