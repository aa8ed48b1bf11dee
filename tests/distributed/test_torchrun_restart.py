"""torchrun's own restarts (``--max-restarts``) with ``resume_from="auto"``: a rank SIGKILLed mid-epoch
makes torchrun restart every rank, which resume from the newest checkpoint and end with the weights
of a run never stopped. Torch only: restarting failed ranks is torchrun's feature (paddle's, mpirun's
and oneflow's launchers end the job instead; a scheduler's requeue restarts those).
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.conformance.helpers import assert_weights_equal
from tests.distributed.launchers import BACKENDS, job_environment
from tests.distributed.test_data_parallel import JOB
from tests.processes import run_process_tree

pytestmark = pytest.mark.distributed


def torchrun(out, kill_at: int) -> subprocess.CompletedProcess:
    config = {"backend": "torch", "device": None, "world_size": 2, "out": str(out), "n_epochs": 2, "shuffle": True,
              "resume_from": "auto", "preempt": {"checkpoints": str(out / "ckpt"), "rank": 1, "at": kill_at,
                                                 "signal": "SIGKILL", "every_n_batches": 3}}
    command = BACKENDS["torch"].command(JOB, config, "torchrun", 2)
    command[3:3] = ["--max-restarts", "1"]  # after "-m torch.distributed.run"
    # A restart with the rendezvous store shared with the process group finds the failed attempt's keys (docs/multinode.md).
    job = run_process_tree(command, 300, env={**job_environment(), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})
    assert job.returncode == 0, job.stderr[-4000:]
    return job


def test_torchrun_restarts_a_killed_rank_and_the_job_ends_with_the_uninterrupted_weights(backend_name, tmp_path):
    if backend_name != "torch":
        pytest.skip("restarting the ranks of a job is torchrun's feature (torch only)")
    straight, restarted = tmp_path / "straight", tmp_path / "restarted"
    straight.mkdir(), restarted.mkdir()
    torchrun(straight, -1)
    job = torchrun(restarted, 5)  # 4 batches an epoch: rank 1 killed inside epoch 2, after batch 3's save
    assert (restarted / "signalled").exists() and "resuming from" in job.stderr + job.stdout, job.stderr[-4000:]
    for rank in (0, 1):
        assert_weights_equal(dict(np.load(restarted / f"rank_{rank}.npz")), dict(np.load(straight / f"rank_{rank}.npz")))
