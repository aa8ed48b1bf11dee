"""The collective-timeout watchdog, framework-free: a rank whose own progress stalls ends its process
with exit code 1, naming the ranks behind it in the shared heartbeat table (real processes)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from fastcore_train.parallel.watchdog import (STEP, STOP_DECISION, Heartbeats, describe, diagnosis, framework_timeout,
                                              laggards, progress_key)

ROOT = Path(__file__).resolve().parents[2]


def test_progress_keys_order_the_points_of_a_batch_and_read_as_words():
    assert progress_key(3, STEP) < progress_key(3, STOP_DECISION) < progress_key(4, STEP)
    assert describe(progress_key(3, STOP_DECISION)) == "the stop decision after batch 3"
    assert laggards([(progress_key(4, STEP), 0.0), (progress_key(3, STEP), 0.0), (progress_key(4, STEP), 0.0)]) == [1]
    assert laggards([(progress_key(4, STEP), 0.0)] * 2) == []
    assert framework_timeout(10) > 10  # the framework's own timeout never speaks before ours


def test_when_no_rank_is_behind_the_report_says_so():
    text = diagnosis(0, 5.0, [(progress_key(2, STEP), 0.0)] * 2, "x.py:1 in f")
    assert "Every rank reached the training step of batch 2" in text and "x.py:1 in f" in text


def waiting_rank(table, then: str) -> str:
    """A script: rank 1's slot stays at the step of batch 3, rank 0 (watched, limit 1 s) reaches the stop
    decision after it and then does ``then`` (waits "in a collective")."""
    return textwrap.dedent(f"""
        import re, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from fastcore_train.parallel.watchdog import STEP, STOP_DECISION, Heartbeats, Watchdog, progress_key
        behind = Heartbeats({str(table)!r}, 2, 1)
        behind.beat(progress_key(3, STEP))
        waiting = Heartbeats({str(table)!r}, 2, 0)
        watchdog = Watchdog(waiting, timeout=1.0, shared=True).start()
        waiting.beat(progress_key(3, STOP_DECISION))
    """) + textwrap.dedent(then)


def test_a_waiting_rank_names_the_rank_that_did_not_arrive(tmp_path):
    """Rank 0 reached the stop decision after batch 3 and waits; rank 1's slot stayed at the step of batch 3."""
    table = tmp_path / "heartbeats"
    Heartbeats.create(str(table), 2)
    script = waiting_rank(table, """
        time.sleep(60)  # "waiting in a collective"
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert "[rank 0] collective timeout" in done.stderr
    assert "Rank 1 did not arrive: it is still at the training step of batch 3" in done.stderr
    assert "rank 0 reached the stop decision after batch 3" in done.stderr
    assert "in <module>" in done.stderr  # where this rank's main thread is


def test_a_rank_that_keeps_making_progress_is_never_ended(tmp_path):
    table = tmp_path / "heartbeats"
    Heartbeats.create(str(table), 1)
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from fastcore_train.parallel.watchdog import Heartbeats, Watchdog
        beats = Heartbeats({str(table)!r}, 1, 0)
        watchdog = Watchdog(beats, timeout=0.5, shared=True).start()
        for _ in range(30):
            time.sleep(0.1)
            beats.touch()
        watchdog.stop()
        time.sleep(1)
        print("finished")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr


def test_a_rank_whose_main_thread_holds_the_gil_is_ended_by_its_watcher_process(tmp_path):
    """The main thread "waits in C++ holding the GIL" (a regular expression that backtracks for hours, as
    jittor's MPI all-reduce waits for a lost host): the watchdog thread cannot run; its watcher process
    says who is behind and ends the rank, within the limit and its grace."""
    table = tmp_path / "heartbeats"
    Heartbeats.create(str(table), 2)
    script = waiting_rank(table, """
        time.sleep(0.5)
        re.match(r"(a+)+$", "a" * 60 + "b")  # holds the GIL far longer than the test
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == -9, stderr
    assert "[rank 0] collective timeout" in stderr
    assert "Rank 1 did not arrive: it is still at the training step of batch 3" in stderr
    assert "holds Python's GIL" in stderr and "watcher process" in stderr


def test_the_watcher_process_ends_with_the_watch(tmp_path):
    table = tmp_path / "heartbeats"
    Heartbeats.create(str(table), 1)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from fastcore_train.parallel.watchdog import Heartbeats, Watchdog
        watchdog = Watchdog(Heartbeats({str(table)!r}, 1, 0), timeout=5.0, shared=True).start()
        watcher = watchdog._watcher
        watchdog.stop()
        print(watcher.returncode)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.split() == ["0"], done.stderr


def test_a_watched_rank_killed_mid_run_leaves_no_heartbeat_folder(tmp_path):
    """The table's folder is removed as soon as the rank and its watcher hold the table open: a rank that
    is killed (SIGKILL, or ended by a collective timeout) leaves nothing behind in the temporary folder,
    while its watchdog still reads the table."""
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from fastcore_train.drivers.collectives import Collectives
        from fastcore_train.parallel.watchdog import start_watchdog
        watchdog = start_watchdog(Collectives(), timeout=30.0)
        watchdog.heartbeats.touch()
        print(os.listdir({str(tmp_path)!r}), watchdog.heartbeats.read()[0][1] > 0, flush=True)
        time.sleep(60)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        said = process.stdout.readline().split()
        process.kill()
        process.wait(timeout=30)
    finally:
        process.kill()
    assert said == ["[]", "True"], process.stderr.read()
    assert list(tmp_path.iterdir()) == []
