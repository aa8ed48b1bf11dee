"""driver="fairscale" with real 2-rank jobs on CPU (gloo): ShardedDataParallel + OSS.

FairScale's FullyShardedDataParallel needs CUDA, so its job runs only where CUDA exists. Tests that
start processes are marked ``distributed`` (the torch-dist tox env); the argument checks run in-process.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fastcore_train.backends.torch import create_driver
from tests.backends.torch.scripts.sharded_job import (HARNESS, PREDICT_X,
                                                      assert_clipped_training_matches_one_process, assert_close,
                                                      outputs, run_in_pool, run_job, single_process_weights)
from tests.conformance.harnesses.base import initial_weights

# 2 ranks x 4 samples x 2 accumulated batches: the same steps as 2 x 8, and as 16 in one process
ACCUMULATE = {"batch_size": 4, "accumulation_steps": 2}
TRAIN = {"driver": "fairscale", "n_epochs": 2, "batch_size": 8, "momentum": 0.9}


@pytest.mark.distributed
def test_two_ranks_accumulating_equal_one_process_and_the_ddp_driver(tmp_path, rank_pool):
    run_in_pool(rank_pool, {**TRAIN, "out": str(tmp_path), "compare_ddp": True, **ACCUMULATE})
    expected = single_process_weights(TRAIN)
    for rank in outputs(tmp_path):
        assert rank["driver"] == "FairScaleDriver" and rank["world_size"] == 2
        assert rank["optimizers"] == ["OSS"]
        assert rank["ddp_driver"] == "TorchDDPDriver"
        assert_close(rank["weights"]["final"], expected)
        # the same steps with the DDP driver give the same weights, bit for bit
        for name, value in rank["weights"]["ddp"].items():
            np.testing.assert_array_equal(rank["weights"]["final"][name], value, err_msg=name)


@pytest.mark.distributed
@pytest.mark.parametrize("clip, accumulate", [({"clip_type": "norm", "clip_value": 0.05}, True),
                                              ({"clip_type": "value", "clip_value": 0.01}, False)])
def test_grad_clipping_on_two_ranks_equals_one_process(tmp_path, clip, accumulate, rank_pool):
    """Each rank holds the reduced gradients of its shard only: OSS combines the norm across ranks."""
    assert_clipped_training_matches_one_process({**TRAIN, **(ACCUMULATE if accumulate else {})}, clip, tmp_path,
                                                rank_pool)


@pytest.mark.distributed
def test_consolidated_checkpoint_resumes_the_same_continuation_under_torchrun(tmp_path, rank_pool):
    run_in_pool(rank_pool, {**TRAIN, "mode": "checkpoint", "save_at": 3, "out": str(tmp_path)})
    expected = single_process_weights(TRAIN)
    ranks = outputs(tmp_path)
    for rank in ranks:
        assert rank["driver"] == "FairScaleDriver" and rank["resumed_batches"] == 8
        # momentum buffers and LR schedule came back from the checkpoint, or the weights would differ
        assert_close(rank["weights"]["final"], expected)
        assert rank["loaded_predictions"] == ranks[0]["saved_predictions"]
    # rank 0 wrote plain state dicts: they load without FairScale
    state = torch.load(tmp_path / "checkpoint" / "training_state.pt", weights_only=True)
    momentum = [entry["momentum_buffer"] for entry in state["optimizers"][0]["state"].values()]
    assert len(momentum) == 4, "the consolidated state holds every parameter's momentum, from both ranks"
    model = HARNESS.make_model(initial_weights())
    model.load_state_dict(torch.load(tmp_path / "checkpoint" / "model.pt", weights_only=True))
    np.testing.assert_allclose(HARNESS.predict(model, PREDICT_X), ranks[0]["saved_predictions"], rtol=1e-6)


def test_fairscale_fsdp_on_cpu_is_refused_with_what_to_use_instead():
    model = HARNESS.make_model(initial_weights())
    with pytest.raises(ValueError, match="needs CUDA.*torch_fsdp"):
        create_driver("fairscale", model, device=["cpu", "cpu"], fairscale_kwargs={"fsdp": True})


def test_one_device_is_refused():
    model = HARNESS.make_model(initial_weights())
    with pytest.raises(ValueError, match="one device per rank"):
        create_driver("fairscale", model, device="cpu")


def test_unknown_fairscale_kwargs_are_refused():
    model = HARNESS.make_model(initial_weights())
    with pytest.raises(TypeError, match="Unknown fairscale_kwargs"):
        create_driver("fairscale", model, device=["cpu", "cpu"], fairscale_kwargs={"fdsp": True})


@pytest.mark.distributed
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="two ranks need two GPUs (NCCL refuses two ranks on one GPU)")
@pytest.mark.skipif(not torch.cuda.is_available(), reason="FairScale FSDP needs CUDA; none on this machine")
def test_fairscale_fsdp_two_ranks_equal_one_process(tmp_path):
    config = {**TRAIN, "scheduler": False, "fairscale_kwargs": {"fsdp": True}}
    done = run_job({**config, "out": str(tmp_path), "device": ["cuda:0", "cuda:1"]})
    assert done.returncode == 0, done.stderr[-4000:]
    expected = single_process_weights(config)
    for rank in outputs(tmp_path):
        assert rank["driver"] == "FairScaleDriver"
        assert_close(rank["weights"]["final"], expected)
