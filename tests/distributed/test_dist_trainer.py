"""fastNLP 0.x's DistTrainer on 2 real ranks started by ``torch.distributed.launch`` (which passes
``--local-rank``): the weights equal our Trainer's on the same ranks, and ``train()`` returns
0.x's dict. Torch only, as 0.x was."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.distributed.launchers import job_environment
from tests.processes import run_process_tree

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "jobs" / "dist_trainer_job.py"


def test_dist_trainer_under_torch_distributed_launch_matches_the_trainer(backend_name, tmp_path):
    if backend_name != "torch":
        pytest.skip("fastNLP 0.x's DistTrainer was torch only; the single-process tests cover paddle and oneflow")
    command = [sys.executable, "-m", "torch.distributed.launch", "--nproc_per_node", "2", str(JOB),
               json.dumps({"out": str(tmp_path)})]
    done = run_process_tree(command, 240, env=job_environment())
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(2)]
    weights = [dict(np.load(tmp_path / f"rank_{r}.npz")) for r in range(2)]
    for rank, seen in enumerate(ranks):
        assert seen["local_rank"] == rank and seen["world_size"] == 2
        assert any(arg.startswith(("--local-rank", "--local_rank")) for arg in seen["argv"]), seen["argv"]
        result = seen["result"]
        assert set(result) == {"seconds", "best_eval", "best_epoch", "best_step"}
        assert set(result["best_eval"]) == {"Accuracy"} and set(result["best_eval"]["Accuracy"]) == {"acc"}
        assert result["best_step"] % 3 == 0 and 1 <= result["best_epoch"] <= 2
        assert seen["every_rank"] == seen["trainer_batches"] == 2 * 6  # 44 samples, 22 per rank, 4 per batch
    assert ranks[0]["master_only"] == 12 and ranks[1]["master_only"] == 0
    assert ranks[0]["result"]["best_eval"] == ranks[1]["result"]["best_eval"]
    for name in ("w1", "b1", "w2", "b2"):
        np.testing.assert_array_equal(weights[0][f"dist_{name}"], weights[0][f"trainer_{name}"])
        np.testing.assert_array_equal(weights[0][f"dist_{name}"], weights[1][f"dist_{name}"])
    assert (tmp_path / "best" / "best_MLP_-acc").is_dir()
