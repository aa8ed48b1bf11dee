"""Preemption with a warning signal: ``CheckpointCallback(requeue_signal=SIGUSR1)``.

One rank of two receives the signal mid-epoch (SLURM's ``--signal=USR1@90`` reaches every task; one
is the hard case): every rank stops after the same batch, one complete checkpoint is saved, every
task exits with the requeue status, and the same command again (``resume_from="auto"``) ends with
the weights of a run never stopped. The tasks are started as srun starts them (SLURM's variables,
``device=None``), so each task's own exit status is what the scheduler reads.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from fastcore_train import REQUEUE_EXIT_CODE, get_last_checkpoint
from tests.conformance.helpers import assert_weights_equal
from tests.distributed.launchers import BACKENDS, run_srun_job
from tests.distributed.test_data_parallel import JOB

pytestmark = pytest.mark.distributed


def test_a_requeue_signal_on_one_rank_saves_on_all_exits_for_requeue_and_the_rerun_ends_identical(backend_name,
                                                                                                 tmp_path):
    if backend_name == "jittor":
        pytest.skip("jittor's ranks come from mpirun, not srun (docs/multinode.md); its signal path is the same code")
    backend = BACKENDS[backend_name]
    straight, preempted = tmp_path / "straight", tmp_path / "preempted"
    straight.mkdir(), preempted.mkdir()
    base = {"n_epochs": 3, "shuffle": True, "resume_from": "auto"}
    for task in run_srun_job(backend, JOB, {**base, "out": str(straight),
                                            "preempt": {"checkpoints": str(straight / "ckpt"), "rank": 1, "at": -1}}):
        assert task.returncode == 0, task.stderr[-4000:]
    job = {**base, "out": str(preempted), "preempt": {"checkpoints": str(preempted / "ckpt"), "rank": 1, "at": 5}}
    signalled = run_srun_job(backend, JOB, job)  # 4 batches an epoch: rank 1 signalled inside epoch 2
    for task in signalled:
        assert task.returncode == REQUEUE_EXIT_CODE, task.stderr[-4000:]
    assert not list(preempted.glob("rank_*.npz")), "a rank finished training"
    saved = get_last_checkpoint(preempted / "ckpt")  # complete: every rank's files, checksums right
    batches = json.loads((saved / "trainer_state.json").read_text())["state"]["global_forward_batches"]
    assert 5 <= batches <= 8 and saved.name == f"epoch_2-batch_{batches}"
    for task in run_srun_job(backend, JOB, job):  # the same command: it resumes (the signal is sent once)
        assert task.returncode == 0, task.stderr[-4000:]
    for rank in (0, 1):
        assert_weights_equal(dict(np.load(preempted / f"rank_{rank}.npz")), dict(np.load(straight / f"rank_{rank}.npz")))
