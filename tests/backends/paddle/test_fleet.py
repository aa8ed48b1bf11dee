"""Paddle Fleet data parallel with real processes on CPU (gloo): self-launched and under
``python -m paddle.distributed.launch``."""
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
import pytest

from fastcore_train import Accuracy, Evaluator, GradClipCallback, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.harnesses.paddle import Harness
from tests.processes import run_process_tree

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "scripts" / "fleet_job.py"
HARNESS = Harness()


def run_job(config: dict, launcher: str = "self", nproc: int = 2, timeout: float = 120,
            log_dir: Path | None = None) -> subprocess.CompletedProcess:
    """Run the job to its end; a job that outlives ``timeout`` is killed with every process it started."""
    config = {"device": ["cpu"] * nproc if launcher == "self" else None, **config}
    if launcher == "self":
        command = [sys.executable, str(JOB), json.dumps(config)]
    else:
        log_dir = log_dir or Path(config["out"]) / "launch_log"
        command = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(nproc),
                   "--log_dir", str(log_dir), str(JOB), json.dumps(config)]
    return run_process_tree(command, timeout)


def outputs(folder: Path, world_size: int) -> list[dict]:
    return [{**json.loads((folder / f"rank_{r}.json").read_text()), "weights": dict(np.load(folder / f"rank_{r}.npz"))}
            for r in range(world_size)]


def single_process_weights(global_batch: int, n_epochs: int = 1, shuffle: bool = False,
                           callbacks: Optional[list] = None) -> dict:
    x, y = make_data(64, seed=4)
    model = HARNESS.make_model(initial_weights())
    Trainer(model, HARNESS.make_dataloader(x, y, global_batch, shuffle=shuffle), HARNESS.make_sgd(model, 0.1),
            driver="paddle", n_epochs=n_epochs, progress_bar=None, callbacks=callbacks).run(num_eval_sanity_batch=0)
    return HARNESS.get_weights(model)


def assert_close(actual: dict, expected: dict) -> None:
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("launcher", ["self", "paddle"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_two_ranks_equal_one_process_on_the_global_batch(tmp_path, launcher, shuffle):
    done = run_job({"out": str(tmp_path), "n_epochs": 2, "shuffle": shuffle}, launcher)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = outputs(tmp_path, 2)
    expected = single_process_weights(16, n_epochs=2, shuffle=shuffle)
    assert not np.array_equal(expected["w1"], initial_weights()["w1"])
    for rank in ranks:
        assert rank["driver"] == "PaddleFleetDriver" and rank["world_size"] == 2
        assert rank["global_forward_batches"] == 8
        assert_close(rank["weights"], expected)
    # the ranks split every epoch between them
    assert Counter(ranks[0]["seen"] + ranks[1]["seen"]) == Counter(list(range(64)) * 2)
    assert not set(ranks[0]["seen"][:32]) & set(ranks[1]["seen"][:32])


def test_accumulation_across_ranks_matches_the_global_batch(tmp_path):
    done = run_job({"out": str(tmp_path), "batch_size": 4, "accumulation_steps": 2})
    assert done.returncode == 0, done.stderr[-4000:]
    for rank in outputs(tmp_path, 2):
        assert_close(rank["weights"], single_process_weights(16))


@pytest.mark.parametrize("clip, accumulation_steps", [({"clip_type": "norm", "clip_value": 0.05}, 2),
                                                      ({"clip_type": "value", "clip_value": 0.01}, 1)])
def test_grad_clipping_on_two_ranks_equals_one_process_on_the_global_batch(tmp_path, clip, accumulation_steps):
    """Every rank clips the gradients averaged across ranks, as one process clips the global batch's."""
    done = run_job({"out": str(tmp_path), "grad_clip": clip, "batch_size": 8 // accumulation_steps,
                    "accumulation_steps": accumulation_steps})
    assert done.returncode == 0, done.stderr[-4000:]
    expected = single_process_weights(16, callbacks=[GradClipCallback(**clip)])
    assert not np.allclose(expected["w1"], single_process_weights(16)["w1"]), "clipping made no difference"
    for rank in outputs(tmp_path, 2):
        assert_close(rank["weights"], expected)


@pytest.mark.parametrize("launcher", ["self", "paddle"])
def test_distributed_evaluation_equals_single_process(tmp_path, launcher):
    done = run_job({"out": str(tmp_path), "evaluate": 37}, launcher)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = outputs(tmp_path, 2)
    model = HARNESS.make_model(dict(ranks[0]["weights"]))
    ex, ey = make_data(37, seed=9)
    expected = Evaluator(model, {"dev": HARNESS.make_dataloader(ex, ey, 5)}, {"acc": Accuracy()},
                         driver="paddle", input_mapping={"y": "target"}, verbose=0).run()
    assert 0 < expected["acc#acc#dev"] < 1
    assert ranks[0]["results"] == ranks[1]["results"] == expected


@pytest.mark.parametrize("saved_with, resumed_with", [(1, 2), (2, 1), (2, 2)])
def test_resume_across_world_sizes_serves_each_sample_once(tmp_path, saved_with, resumed_with):
    first, second, checkpoint = tmp_path / "first", tmp_path / "second", tmp_path / "ckpt"
    first.mkdir(), second.mkdir()

    def run(config, nproc):
        if nproc == 1:
            config = {**config, "device": "cpu"}
        done = run_job(config, "self", nproc=nproc)
        assert done.returncode == 0, done.stderr[-4000:]

    run({"out": str(first), "shuffle": True, "batch_size": 4, "save_at": 3, "save_to": str(checkpoint)}, saved_with)
    assert json.loads((checkpoint / "meta.json").read_text())["world_size"] == saved_with
    run({"out": str(second), "shuffle": True, "batch_size": 4, "resume_from": str(checkpoint)}, resumed_with)
    seen = Counter()
    for folder, nproc in ((first, saved_with), (second, resumed_with)):
        for rank in outputs(folder, nproc):
            seen.update(rank["seen"])
    padding = [i for i, count in seen.items() if count > 1]
    assert set(seen) == set(range(64))
    assert len(padding) <= 1 and all(seen[i] == 2 for i in padding), "only a distributed epoch's padding repeats"


@pytest.mark.parametrize("launcher, failing_rank", [("self", 1), ("self", 0), ("paddle", 1)])
def test_a_failing_rank_ends_the_job_quickly(tmp_path, launcher, failing_rank):
    started = time.monotonic()
    done = run_job({"out": str(tmp_path), "n_epochs": 50, "fail_rank": failing_rank, "fail_at": 3}, launcher,
                   timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode != 0
    logs = done.stdout + done.stderr + "".join(p.read_text(errors="replace")
                                               for p in tmp_path.glob("launch_log/workerlog.*"))
    assert f"rank {failing_rank} fails on purpose" in logs
    assert elapsed < 30, f"the job took {elapsed:.1f} s to stop"
    assert not list(tmp_path.glob("rank_*.npz")), "no rank may finish training"


def test_events_save_and_load_behave_as_in_one_process(tmp_path):
    """The conformance checks that matter across ranks: event order/counts, every=, save/load."""
    done = run_job({"out": str(tmp_path), "n_epochs": 2, "evaluate": 10, "save_model": str(tmp_path / "model")})
    assert done.returncode == 0, done.stderr[-4000:]
    epoch = ["on_train_epoch_begin"] + ["on_train_batch_begin", "on_before_backward", "on_after_optimizers_step",
                                        "on_train_batch_end"] * 4 + ["on_train_epoch_end", "on_evaluate_end"]
    for rank in outputs(tmp_path, 2):
        assert rank["events"] == ["on_train_begin"] + epoch * 2 + ["on_train_end"]
        assert rank["every"] == [3, 6]
        assert rank["round_trip"] is True
    assert [p.name for p in (tmp_path / "model").iterdir()] == ["model.pdparams"], "only rank 0 writes"


def test_a_users_parallel_env_and_data_parallel_model_are_respected(tmp_path):
    done = run_job({"out": str(tmp_path), "user_dp": True}, "paddle")
    assert done.returncode == 0, done.stderr[-4000:]
    for rank in outputs(tmp_path, 2):
        assert rank["driver"] == "PaddleFleetDriver"
        assert_close(rank["weights"], single_process_weights(16))


def test_ctrl_c_stops_every_rank(tmp_path):
    config = {"out": str(tmp_path), "device": ["cpu", "cpu"], "n_epochs": 100000, "announce": True}
    job = subprocess.Popen([sys.executable, str(JOB), json.dumps(config)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert "TRAINING" in job.stdout.readline()
        time.sleep(2)  # let both ranks train
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
