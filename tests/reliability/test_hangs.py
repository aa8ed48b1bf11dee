"""Nothing hangs in data parallel: a stuck rank, a rank stopping alone, a rank dying without a Python
error and SIGTERM, each with 2 real ranks on CPU, on every backend (see docs/reliability.md)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.distributed.launchers import BACKENDS, job_environment, run_job, run_pooled
from tests.reliability.jobs import hang_job
from tests.processes import read_line, wait_until

pytestmark = pytest.mark.distributed
JOB = Path(__file__).parent / "jobs" / "hang_job.py"
TIMEOUT = 8  # collective_timeout of the stuck-rank jobs: short, yet longer than any step under load


def ranks_json(out: Path, world_size: int = 2) -> list[dict]:
    return [json.loads((out / f"rank_{rank}.json").read_text()) for rank in range(world_size)]


def everything_said(done: subprocess.CompletedProcess, backend, out: Path) -> str:
    return done.stdout + done.stderr + backend.launcher_logs(out)


@pytest.mark.parametrize("launcher", ["self", "framework"])
def test_a_stuck_rank_ends_the_job_naming_it(backend_name, tmp_path, launcher):
    backend = BACKENDS[backend_name]
    started = time.monotonic()
    done = run_job(backend, JOB, {"out": str(tmp_path), "hang_rank": 1, "hang_at": 3, "n_epochs": 50,
                                  "collective_timeout": TIMEOUT},
                   backend.launcher if launcher == "framework" else "self", timeout=240)
    elapsed = time.monotonic() - started
    said = everything_said(done, backend, tmp_path)
    assert done.returncode != 0, said[-3000:]
    assert "collective timeout" in said and "Rank 1 did not arrive" in said, said[-3000:]
    assert not list(tmp_path.glob("rank_*.json")), "no rank may finish training"
    assert elapsed < 150, f"the job took {elapsed:.0f} s to end"


def test_a_rank_saving_longer_than_the_collective_timeout_is_not_timed_out(tmp_path, rank_pool):
    """Rank 0 writes each checkpoint's model file for 2 x collective_timeout while rank 1 waits for it: saving is a
    long phase without heartbeats, allowed BUSY_LIMIT, so the job finishes (a stuck rank is still ended: above)."""
    run_pooled(rank_pool, hang_job.main, {"out": str(tmp_path), "n_epochs": 1, "collective_timeout": 2,
                                          "checkpoints": str(tmp_path / "checkpoints"), "every_n_batches": 2,
                                          "slow_regular_save": 4}, timeout=180)
    assert "collective timeout" not in rank_pool.output("stdout") + rank_pool.output("stderr")
    assert [rank["batches"] for rank in ranks_json(tmp_path)] == [4, 4]
    assert len(list((tmp_path / "checkpoints").glob("*/epoch_1-batch_*/meta.json"))) == 2


@pytest.mark.parametrize("stop_at, accumulation_steps, expected", [(3, 1, (3, 4)), (3, 2, (4,)), ("epoch", 1, (4,))])
def test_one_rank_stopping_stops_every_rank_at_the_same_batch(tmp_path, stop_at, accumulation_steps, expected,
                                                               rank_pool):
    """stop_training() on rank 1 alone (as EarlyStop or NanGuard may call it) stops both ranks after the
    same batch: an optimizer step at which the ranks exchange requests (after batch 3, or at the latest
    the epoch's end after batch 4; with accumulation_steps=2 the group ends with batch 4), or the epoch's
    end. Without the exchange rank 0 would train on alone and wait for rank 1 forever."""
    run_pooled(rank_pool, hang_job.main, {"out": str(tmp_path), "stop_rank": 1, "stop_at": stop_at,
                                          "accumulation_steps": accumulation_steps}, timeout=180)
    batches = [rank["batches"] for rank in ranks_json(tmp_path)]
    assert batches[0] == batches[1] and batches[0] in expected, batches


def test_a_nan_loss_on_one_rank_stops_every_rank_naming_it(backend_name, tmp_path):
    """Rank 1's loss is NaN at batch 3, a checked one (check_every=2): the ranks sum one flag, so both stop
    there with NonFiniteLossError, and only then gather the losses to name rank 1; batch 1's check passed."""
    backend = BACKENDS[backend_name]
    done = run_job(backend, JOB, {"out": str(tmp_path), "nan_rank": 1, "nan_at": 2, "n_epochs": 1}, timeout=180)
    said = everything_said(done, backend, tmp_path)
    assert done.returncode != 0, said[-3000:]
    for rank in range(2):
        assert json.loads((tmp_path / f"rank_{rank}.exception").read_text()) == \
            {"type": "NonFiniteLossError", "batches": 2}, said[-3000:]
    assert "batch 3 overall) on rank(s) 1 (loss nan)" in said and "the last, batch 1, was finite" in said, said[-3000:]


def test_the_collective_timeout_reaches_every_rank(tmp_path, rank_pool):
    run_pooled(rank_pool, hang_job.main, {"out": str(tmp_path), "n_epochs": 1, "collective_timeout": 123.5}, timeout=180)
    assert [rank["timeout"] for rank in ranks_json(tmp_path)] == [123.5, 123.5]


def test_a_rank_killed_without_a_python_error_is_named_with_its_signal(backend_name, tmp_path):
    backend = BACKENDS[backend_name]
    started = time.monotonic()
    done = run_job(backend, JOB, {"out": str(tmp_path), "kill_rank": 1, "kill_at": 3, "n_epochs": 50, "slow": True},
                   timeout=180)
    elapsed = time.monotonic() - started
    said = everything_said(done, backend, tmp_path)
    assert done.returncode != 0
    # ours: "rank 1 (pid 123) was killed by SIGKILL"; mpirun's (jittor; Open MPI 5 wraps the line):
    # "...process rank 1 with PID 123 on node vm exited on\n signal 9 (Killed)"
    named = r"rank 1 \(pid \d+\) was killed by SIGKILL|rank 1 with PID \d+ [\s\S]*?exited on\s+signal 9"
    assert re.search(named, said), said[-3000:]
    assert not list(tmp_path.glob("rank_*.json"))
    assert elapsed < 120, f"the job took {elapsed:.0f} s to end"


def test_a_rank_that_exits_with_code_0_mid_epoch_is_named_as_the_failure(backend_name, tmp_path):
    """``os._exit(0)`` on rank 1 in the middle of an epoch: exit code 0, yet the job did not finish. The process
    that started the ranks (a self-launched rank 0, oneflow's supervisor) names it, not only gloo's "Connection
    reset by peer" from the rank left waiting."""
    if backend_name == "jittor":
        pytest.skip("jittor's self-launched ranks are started and supervised by mpirun, which reports their ends")
    backend = BACKENDS[backend_name]
    started = time.monotonic()
    done = run_job(backend, JOB, {"out": str(tmp_path), "exit0_rank": 1, "exit0_at": 3, "n_epochs": 50, "slow": True},
                   timeout=180)
    elapsed = time.monotonic() - started
    said = everything_said(done, backend, tmp_path)
    assert done.returncode != 0, said[-3000:]
    assert re.search(r"rank 1 \(pid \d+\) exited with code 0 before the job finished", said), said[-3000:]
    assert not list(tmp_path.glob("rank_*.json"))
    assert elapsed < 120, f"the job took {elapsed:.0f} s to end"


def test_sigterm_stops_every_rank_at_the_same_batch_with_an_exception_checkpoint(backend_name, tmp_path):
    """SIGTERM to the process the user started (what ``timeout`` and schedulers do) acts as Ctrl-C on
    every rank: on_exception runs on each, after the same batch, and the exception checkpoint is saved."""
    backend = BACKENDS[backend_name]
    checkpoints = tmp_path / "checkpoints"
    config = {"backend": backend.name, "out": str(tmp_path), "device": ["cpu", "cpu"], "world_size": 2,
              "n_epochs": 100000, "slow": True, "announce": True, "checkpoints": str(checkpoints)}
    job = subprocess.Popen(backend.command(JOB, config, "self", 2), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True, env=job_environment())
    try:
        assert "TRAINING" in read_line(job.stdout, 120)
        job.send_signal(signal.SIGTERM)  # to the process the user started only
        _, stderr = job.communicate(timeout=90)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode != 0
    exceptions = [json.loads((tmp_path / f"rank_{rank}.exception").read_text()) for rank in range(2)]
    assert [e["type"] for e in exceptions] == ["TrainingTerminated"] * 2, stderr[-3000:]
    assert exceptions[0]["batches"] == exceptions[1]["batches"] > 0
    saved = list(checkpoints.glob("*/exception_TrainingTerminated/meta.json"))
    assert len(saved) == 1, (list(checkpoints.rglob("*")), stderr[-3000:])
    assert json.loads(saved[0].read_text())["world_size"] == 2
    wait_until(lambda: not subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).stdout, 10,
               "the end of every process of the job (no orphan may survive)")
