"""OneFlow DDP with real processes on CPU: self-launched from a plain process and under
``python -m oneflow.distributed.launch``."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import numpy as np
import oneflow as flow
import pytest

from fastcore_train import Accuracy, Evaluator, GradClipCallback, Trainer
from fastcore_train.launch import free_port
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.harnesses.oneflow import Harness
from tests.processes import run_process_tree

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "scripts" / "ddp_job.py"
HARNESS = Harness()
#: What ``import oneflow`` wrote into this (plain) test process's environment; a job must not inherit it.
_ONEFLOW_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE")


def job_command(config: dict, launcher: str, nproc: int = 2) -> list[str]:
    if launcher == "self":
        return [sys.executable, str(JOB), json.dumps(config)]
    return [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node", str(nproc),
            "--master_port", str(free_port()), str(JOB), json.dumps(config)]


def job_environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in _ONEFLOW_ENV}


def run_job(config: dict, launcher: str = "self", nproc: int = 2, timeout: float = 120) -> subprocess.CompletedProcess:
    config = {"device": ["cpu"] * nproc if launcher == "self" else None, **config}
    command = job_command(config, launcher, nproc)
    return run_process_tree(command, timeout, env=job_environment())


def outputs(folder: Path, world_size: int = 2) -> list[dict]:
    return [{**json.loads((folder / f"rank_{r}.json").read_text()), "weights": dict(np.load(folder / f"rank_{r}.npz"))}
            for r in range(world_size)]


def single_process_weights(global_batch: int, n_epochs: int = 1, shuffle: bool = False,
                           callbacks: Optional[list] = None) -> dict:
    x, y = make_data(64, seed=4)
    model = HARNESS.make_model(initial_weights())
    Trainer(model, HARNESS.make_dataloader(x, y, global_batch, shuffle=shuffle), HARNESS.make_sgd(model, 0.1),
            driver="oneflow", n_epochs=n_epochs, progress_bar=None, callbacks=callbacks).run(num_eval_sanity_batch=0)
    return HARNESS.get_weights(model)


def assert_close(actual: dict, expected: dict) -> None:
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("launcher", ["self", "oneflow"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_two_ranks_equal_one_process_on_the_global_batch(tmp_path, launcher, shuffle):
    done = run_job({"out": str(tmp_path), "n_epochs": 2, "shuffle": shuffle}, launcher)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = outputs(tmp_path)
    expected = single_process_weights(16, n_epochs=2, shuffle=shuffle)
    for rank in ranks:
        assert rank["driver"] == "OneflowDDPDriver" and rank["world_size"] == 2
        assert rank["global_forward_batches"] == 8
        assert_close(rank["weights"], expected)
    assert Counter(ranks[0]["seen"] + ranks[1]["seen"]) == Counter(list(range(64)) * 2)
    assert not set(ranks[0]["seen"][:32]) & set(ranks[1]["seen"][:32])
    # collectives on objects
    for rank in ranks:
        assert rank["gathered"] == [{"rank": 0, "text": "xxx"}, {"rank": 1, "text": "xxxx"}]
        assert rank["broadcast"] == "from 1"


def test_accumulation_with_no_sync_matches_the_global_batch(tmp_path):
    done = run_job({"out": str(tmp_path), "batch_size": 4, "accumulation_steps": 2, "probe_no_sync": True})
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = outputs(tmp_path)
    for rank in ranks:
        assert_close(rank["weights"], single_process_weights(16))
    # Inside no_sync each rank keeps the gradient of its own 4 samples: nothing was averaged.
    x, y = make_data(64, seed=4)
    for index, rank in enumerate(ranks):
        model = HARNESS.make_model({k: v for k, v in rank["weights"].items()})
        xs, ys = flow.from_numpy(x[index * 4:(index + 1) * 4]), flow.from_numpy(y[index * 4:(index + 1) * 4])
        flow.nn.functional.cross_entropy(model(xs), ys).backward()
        np.testing.assert_allclose(np.array(rank["probe"]), model.fc1.weight.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert not np.allclose(ranks[0]["probe"], ranks[1]["probe"])


@pytest.mark.parametrize("clip, accumulation_steps", [({"clip_type": "norm", "clip_value": 0.05}, 2),
                                                      ({"clip_type": "value", "clip_value": 0.01}, 1)])
def test_grad_clipping_on_two_ranks_equals_one_process_on_the_global_batch(tmp_path, clip, accumulation_steps):
    """Every rank clips the gradients averaged across ranks, as one process clips the global batch's."""
    done = run_job({"out": str(tmp_path), "grad_clip": clip, "batch_size": 8 // accumulation_steps,
                    "accumulation_steps": accumulation_steps})
    assert done.returncode == 0, done.stderr[-4000:]
    expected = single_process_weights(16, callbacks=[GradClipCallback(**clip)])
    assert not np.allclose(expected["w1"], single_process_weights(16)["w1"]), "clipping made no difference"
    for rank in outputs(tmp_path):
        assert_close(rank["weights"], expected)


@pytest.mark.parametrize("launcher", ["self", "oneflow"])
def test_distributed_evaluation_equals_single_process(tmp_path, launcher):
    done = run_job({"out": str(tmp_path), "evaluate": 37}, launcher)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = outputs(tmp_path)
    model = HARNESS.make_model({k: v for k, v in ranks[0]["weights"].items()})
    ex, ey = make_data(37, seed=9)
    expected = Evaluator(model, {"dev": HARNESS.make_dataloader(ex, ey, 5)}, {"acc": Accuracy()},
                         driver="oneflow", input_mapping={"y": "target"}, verbose=0).run()
    assert ranks[0]["results"] == ranks[1]["results"] == expected


@pytest.mark.parametrize("launcher, failing_rank", [("self", 1), ("self", 0), ("oneflow", 1)])
def test_a_failing_rank_ends_the_job_quickly(tmp_path, launcher, failing_rank):
    started = time.monotonic()
    done = run_job({"out": str(tmp_path), "n_epochs": 50, "fail_rank": failing_rank, "fail_at": 3}, launcher,
                   timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode != 0
    assert f"rank {failing_rank} fails on purpose" in done.stderr
    assert elapsed < 30, f"the job took {elapsed:.1f} s to stop"
    assert not list(tmp_path.glob("rank_*.npz")), "no rank may finish training"


def test_ctrl_c_stops_every_rank(tmp_path):
    config = {"out": str(tmp_path), "device": ["cpu", "cpu"], "n_epochs": 100000, "announce": True}
    job = subprocess.Popen(job_command(config, "self"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True, env=job_environment())
    try:
        assert "TRAINING" in job.stdout.readline()
        time.sleep(5)  # let the ranks start and train
        started = time.monotonic()
        os.killpg(job.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process of the group
        job.wait(timeout=30)
        assert time.monotonic() - started < 30
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode != 0
    time.sleep(1)
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert leftover == [], "no orphan process may survive"
