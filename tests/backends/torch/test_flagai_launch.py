"""FlagAI's EnvTrainer example (examples/vit_cifar100/train_env_trainer.py) as its user writes it:
a ``torch.device`` as ``pytorch_device``, and FlagAI's documented launcher line, under which torch 2
passes ``--local-rank`` where FlagAI reads ``--local_rank``. Torch only: FlagAI is."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fastcore_train.config import EnvArgs, from_flagai
from fastcore_train.parallel.launch import free_port
from tests.distributed.launchers import job_environment
from tests.processes import run_process_tree

JOB = Path(__file__).parent / "scripts" / "flagai_env_trainer_job.py"


def test_a_device_object_is_the_device_it_names():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # the example's line
    expected = ["cpu", "cpu"] if device.type == "cpu" else [0, 1]
    assert from_flagai(env_type="pytorchDDP", num_gpus=2, pytorch_device=device).device == expected
    cpu = torch.device("cpu")
    assert from_flagai(env_type="pytorchDDP", num_gpus=2, pytorch_device=cpu).device == ["cpu", "cpu"]
    assert from_flagai(env_type="pytorch", pytorch_device=cpu).device == "cpu"
    assert from_flagai(env_type="pytorch", pytorch_device=torch.device("cuda", 1)).device == "cuda:1"
    assert from_flagai(env_type="pytorchDDP", num_gpus=2, pytorch_device=torch.device("cuda")).device == [0, 1]
    args = EnvArgs(env_type="pytorchDDP", num_gpus=2, pytorch_device=cpu).parse_args([])
    assert args.trainer_args().device == ["cpu", "cpu"]


@pytest.mark.parametrize("flag", ["--local_rank=1", "--local-rank=1", "--local-rank 1"])
def test_both_spellings_of_the_local_rank_flag_are_read(flag):
    args = EnvArgs(env_type="pytorchDDP").parse_args(["--not_call_launch", *flag.split()])
    assert args.local_rank == 1 and args.not_call_launch


@pytest.mark.distributed
def test_flagai_launcher_line_trains_on_two_ranks(tmp_path):
    command = [sys.executable, "-m", "torch.distributed.launch", "--nproc_per_node", "2", "--nnodes", "1",
               "--node_rank", "0", "--master_addr", "localhost", "--master_port", str(free_port()), str(JOB),
               "--not_call_launch", "--env_type", "pytorchDDP", f"--out={tmp_path}"]
    done = run_process_tree(command, 180, env=job_environment())
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank_{rank}.json").read_text()) for rank in range(2)]
    for rank, seen in enumerate(ranks):
        assert any(arg.startswith("--local-rank") for arg in seen["argv"]), seen["argv"]  # torch 2's spelling
        assert seen["local_rank"] == seen["rank"] == rank and seen["world_size"] == 2
        assert seen["device"] == "cpu" and seen["batches"] == 4  # 32 samples, 4 per batch, half per rank
    for name in ranks[0]["weights"]:
        np.testing.assert_array_equal(ranks[0]["weights"][name], ranks[1]["weights"][name])
