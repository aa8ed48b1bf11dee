"""A self-launching job's report when ranks end badly: every rank that ended is named, the first
to end (the cause) first, whether the supervising thread waits for the ranks or is busy training.

Real processes stand in for ranks: one kills itself, another aborts shortly after, as a framework
aborts a rank whose peer vanished (oneflow's "Check failed ... EPOLLERR")."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time

SUPERVISOR = textwrap.dedent("""
    import os, signal, subprocess, sys, tempfile, time
    from fastcore_train.parallel.launch import WorkerGroup
    from fastcore_train.parallel.run_markers import RUN_MARKERS_ENV

    markers = tempfile.mkdtemp()
    PRELUDE = "import os, signal, time\\nfrom fastcore_train.parallel.run_markers import RunMarker\\n"

    def rank(code):
        return subprocess.Popen([sys.executable, "-c", PRELUDE + code], env={**os.environ, RUN_MARKERS_ENV: markers})

    mode = sys.argv[1]
    if mode == "cascade":  # rank 1 is killed; rank 0 aborts 0.3 s later because of it
        ranks = [rank("time.sleep(0.5); os.abort()"), rank("time.sleep(0.2); os.kill(os.getpid(), signal.SIGKILL)")]
    elif mode == "early":  # rank 1 leaves with exit code 0 inside Trainer.run (its run marker is there)
        ranks = [rank("time.sleep(60)"), rank("RunMarker(1).__enter__(); time.sleep(0.2); os._exit(0)")]
    elif mode == "finished":  # both ranks leave Trainer.run, then exit with code 0
        ranks = [rank("with RunMarker(0): time.sleep(0.5)"), rank("with RunMarker(1): time.sleep(0.2)")]
    else:  # rank 1 fails alone; rank 0 would go on for a minute
        ranks = [rank("time.sleep(60)"), rank("time.sleep(0.2); raise SystemExit(3)")]
    group = WorkerGroup(ranks, [0, 1], markers)
    print("pids", ranks[0].pid, ranks[1].pid, flush=True)
    if sys.argv[2] == "waits":  # a supervisor that only waits for the ranks (oneflow's self-launch)
        group.wait()
        if group.failures():
            group.give_up()
    else:  # rank 0 itself, busy training: the watcher thread must act
        time.sleep(30)
    print("NOT STOPPED", flush=True)
    print("markers left:", os.listdir(markers) if os.path.isdir(markers) else "none", flush=True)
""")


def supervise(mode: str, how: str) -> tuple[subprocess.CompletedProcess, float, list[str]]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SUPERVISOR, mode, how], capture_output=True, text=True, timeout=60)
    pids = re.search(r"pids (\d+) (\d+)", done.stdout).groups()
    return done, time.monotonic() - started, list(pids)


def test_the_rank_that_ended_first_is_named_first_and_the_ones_it_took_down_after_it():
    for how in ("waits", "busy"):
        done, elapsed, (pid0, pid1) = supervise("cascade", how)
        assert done.returncode == 1 and "NOT STOPPED" not in done.stdout, (how, done.stdout, done.stderr)
        assert (f"rank 1 (pid {pid1}) was killed by SIGKILL first; then rank 0 (pid {pid0}) was killed by SIGABRT: "
                "stopping every rank.") in done.stderr, (how, done.stderr)
        assert elapsed < 10, (how, elapsed)


def test_a_lone_failure_stops_the_ranks_still_running_after_a_short_grace():
    done, elapsed, (pid0, pid1) = supervise("alone", "busy")
    assert done.returncode == 1 and "NOT STOPPED" not in done.stdout, done.stderr
    assert f"rank 1 (pid {pid1}) exited with code 3: stopping every rank." in done.stderr, done.stderr
    assert f"rank 0 (pid {pid0})" not in done.stderr, "rank 0 was stopped by us, not a cause"
    assert elapsed < 10, elapsed


def test_a_rank_that_exits_with_code_0_inside_run_is_named_as_the_failure():
    """os._exit(0) in the middle of training: not a success, though the exit code is 0 (its run marker says
    it was inside Trainer.run), so the job ends naming it rather than with the others' "Connection reset"."""
    for how in ("waits", "busy"):
        done, elapsed, (pid0, pid1) = supervise("early", how)
        assert done.returncode == 1 and "NOT STOPPED" not in done.stdout, (how, done.stdout, done.stderr)
        assert f"rank 1 (pid {pid1}) exited with code 0 before the job finished: stopping every rank." in done.stderr, \
            (how, done.stderr)
        assert f"rank 0 (pid {pid0})" not in done.stderr, "rank 0 was stopped by us, not a cause"
        assert elapsed < 10, (how, elapsed)


def test_ranks_that_finished_run_and_exit_with_code_0_are_a_success():
    done, _, _ = supervise("finished", "waits")
    assert done.returncode == 0 and "stopping every rank" not in done.stderr, done.stderr
    assert "NOT STOPPED" in done.stdout and "markers left: []" in done.stdout, done.stdout
