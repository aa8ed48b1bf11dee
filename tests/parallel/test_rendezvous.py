"""Ranks that meet when their framework is imported (oneflow): rank 0 starts first, the others once it
listens at the rendezvous, so none finds it absent (oneflow retries a connection only 10 s later).

Real processes: the script below re-runs itself as each rank (as a self-launch does); rank 0 opens the
rendezvous port only after a pause, rank 1 tries it once the moment it starts."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from fastcore_train.parallel.launch import RENDEZVOUS_WAIT, free_port

JOB = textwrap.dedent("""
    import os, socket, sys, time
    from fastcore_train.parallel.environment import LAUNCHED_RANK_ENV
    from fastcore_train.parallel.launch import spawn_workers

    port, rank_zero = int(sys.argv[1]), sys.argv[2]
    rank = os.environ.get(LAUNCHED_RANK_ENV)
    if rank is None:  # the supervisor
        group = spawn_workers(2, lambda r: {}, "all", first_rank=0, rendezvous=f"127.0.0.1:{port}")
        group.wait()
        print("exit codes", [p.returncode for p in group.processes], flush=True)
    elif rank == "0":
        if rank_zero == "fails":
            sys.exit(3)
        time.sleep(1.0)  # importing its framework
        server = socket.create_server(("127.0.0.1", port))
        server.settimeout(30)
        for _ in range(2):  # the supervisor's probe, then rank 1
            server.accept()[0].close()
    else:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            print("rank 1 found rank 0 listening", flush=True)
        except OSError as error:
            print("rank 1 found nothing:", error, flush=True)
""")


def run(rank_zero: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", JOB, str(free_port()), rank_zero], capture_output=True, text=True,
                          timeout=RENDEZVOUS_WAIT / 2)


def test_the_other_ranks_start_once_rank_zero_listens():
    done = run("listens")
    assert "rank 1 found rank 0 listening" in done.stdout and "exit codes [0, 0]" in done.stdout, done


def test_a_rank_zero_that_ends_before_listening_does_not_hold_the_others_back():
    """(The group's watcher then names rank 0's end; here only the start is checked.) The run's own limit is
    half the rendezvous wait: the others started when rank 0 ended, not when the wait ran out."""
    done = run("fails")
    assert "rank 1 found nothing" in done.stdout and "exit codes [3, 0]" in done.stdout, done
