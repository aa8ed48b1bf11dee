"""SIGTERM during ``Trainer.run`` in one process acts as Ctrl-C: training stops at a batch boundary,
on_exception listeners run, CheckpointCallback saves its exception checkpoint, and ``run()`` returns
(``catch_KeyboardInterrupt`` defaults to True in one process). Runs on every backend."""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from tests.distributed.launchers import BACKENDS, job_environment
from tests.processes import read_line

JOB = Path(__file__).parent / "jobs" / "hang_job.py"


def test_sigterm_stops_training_like_ctrl_c_and_saves_the_exception_checkpoint(backend_name, tmp_path):
    backend = BACKENDS[backend_name]
    checkpoints = tmp_path / "checkpoints"
    config = {"backend": backend.name, "out": str(tmp_path), "device": "cpu", "world_size": 1, "n_epochs": 100000,
              "slow": True, "announce": True, "checkpoints": str(checkpoints)}
    job = subprocess.Popen(backend.command(JOB, config, "self", 1), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=job_environment())
    try:
        assert "TRAINING" in read_line(job.stdout, 120)
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, stderr[-3000:]  # run() returned and the script went on
    exception = json.loads((tmp_path / "rank_0.exception").read_text())
    after = json.loads((tmp_path / "rank_0.json").read_text())
    assert exception["type"] == "TrainingTerminated" and exception["batches"] == after["batches"] > 0
    assert len(list(checkpoints.glob("*/exception_TrainingTerminated/meta.json"))) == 1
    assert "SIGTERM received" in stderr and "Training interrupted (SIGTERM)" in stderr
