"""``srun python train.py`` with ``device=None``: the tasks form one data-parallel job, on every backend.

There is no SLURM here: the tasks are started side by side with only the variables srun sets
(``tests/distributed/launchers.py: run_srun_job``), no torchrun / paddle / oneflow launcher variables.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.distributed.launchers import BACKENDS, run_srun_job
from tests.distributed.test_data_parallel import JOB, SAMPLES, assert_close, rank_outputs, single_process_weights

pytestmark = pytest.mark.distributed


def test_srun_tasks_form_one_job_of_two_ranks(backend_name, harness, tmp_path):
    backend = BACKENDS[backend_name]
    tasks = run_srun_job(backend, JOB, {"out": str(tmp_path), "announce": True})
    if backend_name == "jittor":
        # jittor's MPI cannot take its ranks from SLURM's variables: each task says what to run instead.
        for task in tasks:
            assert task.returncode != 0
            assert "jittor cannot take its rank from SLURM" in task.stderr and "mpirun -np" in task.stderr
        assert not list(Path(tmp_path).glob("rank_*.json")), "a task trained alone"
        return
    for task in tasks:
        assert task.returncode == 0, task.stderr[-4000:]
    ranks = rank_outputs(tmp_path, 2)
    for rank in ranks:
        assert rank["driver"] == backend.distributed_driver and rank["world_size"] == 2
        assert rank["global_forward_batches"] == 4  # each rank trained half of the 8 batches of 8
        assert rank["gathered"] == [{"rank": 0, "text": "xxx"}, {"rank": 1, "text": "xxxx"}]
    assert sorted(ranks[0]["seen"] + ranks[1]["seen"]) == list(range(SAMPLES))
    assert Counter(ranks[0]["seen"]) & Counter(ranks[1]["seen"]) == Counter(), "the ranks split the data"
    for name in ranks[0]["weights"]:
        assert (ranks[0]["weights"][name] == ranks[1]["weights"][name]).all(), f"{name} differs between ranks"
    assert_close(ranks[0]["weights"], single_process_weights(harness, 16))
    assert "TRAINING" in tasks[0].stdout and "TRAINING" not in tasks[1].stdout
