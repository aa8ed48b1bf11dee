"""driver="torch_fsdp" (torch's FullyShardedDataParallel) with real 2-rank jobs on CPU (gloo).

Tests that start processes are marked ``distributed`` (the torch-dist tox env); the argument
checks run in-process.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fastcore_train import Accuracy, Evaluator
from fastcore_train.backends.torch import create_driver
from tests.backends.torch.scripts.sharded_job import (HARNESS, PREDICT_X,
                                                      assert_clipped_training_matches_one_process, assert_close,
                                                      outputs, run_in_pool, single_process_weights)
from tests.conformance.harnesses.base import initial_weights, make_data

# 2 ranks x 4 samples x 2 accumulated batches: the same steps as 2 x 8, and as 16 in one process
ACCUMULATE = {"batch_size": 4, "accumulation_steps": 2}
TRAIN = {"driver": "torch_fsdp", "n_epochs": 2, "batch_size": 8, "momentum": 0.9}


def checkpoint_job(tmp_path, mode, state_dict_type, pool):
    """Run the job in a checkpoint ``mode`` (saving at batch 3) to its successful end; each rank's outputs."""
    run_in_pool(pool, {**TRAIN, "mode": mode, "save_at": 3, "out": str(tmp_path),
                       "torch_fsdp_kwargs": {"state_dict_type": state_dict_type}})
    return outputs(tmp_path)


def assert_resumed_exactly(rank, expected):
    """Resumed to the end: weights, momentum and LR schedule came back, or the continuation would differ."""
    assert rank["driver"] == "TorchFSDPDriver" and rank["resumed_batches"] == 8
    assert_close(rank["weights"]["final"], expected)


@pytest.mark.distributed
def test_two_ranks_accumulating_equal_one_process_and_evaluate_alike(tmp_path, rank_pool):
    run_in_pool(rank_pool, {**TRAIN, "out": str(tmp_path), "evaluate": 37, **ACCUMULATE})
    expected = single_process_weights(TRAIN)
    ranks = outputs(tmp_path)
    for rank in ranks:
        assert rank["driver"] == "TorchFSDPDriver" and rank["world_size"] == 2
        assert rank["optimizers"] == ["SGD"], "use_orig_params=True: the user's optimizer trains the shards"
        assert_close(rank["weights"]["final"], expected)
    ex, ey = make_data(37, seed=9)
    single = Evaluator(HARNESS.make_model(ranks[0]["weights"]["final"]), {"dev": HARNESS.make_dataloader(ex, ey, 5)},
                       {"acc": Accuracy()}, input_mapping={"y": "target"}, verbose=0).run()
    assert ranks[0]["results"] == ranks[1]["results"] == single


@pytest.mark.distributed
@pytest.mark.parametrize("clip, accumulate", [({"clip_type": "norm", "clip_value": 0.05}, True),
                                              ({"clip_type": "value", "clip_value": 0.01}, False)])
def test_grad_clipping_on_two_ranks_equals_one_process(tmp_path, clip, accumulate, rank_pool):
    """Gradients are sharded: FSDP's clip_grad_norm_ combines the norm across ranks."""
    assert_clipped_training_matches_one_process({**TRAIN, **(ACCUMULATE if accumulate else {})}, clip, tmp_path,
                                                rank_pool)


@pytest.mark.distributed
@pytest.mark.parametrize("state_dict_type", ["full", "sharded"])
def test_checkpoints_round_trip(tmp_path, state_dict_type, rank_pool):
    ranks = checkpoint_job(tmp_path, "checkpoint", state_dict_type, rank_pool)
    expected = single_process_weights(TRAIN)
    for rank in ranks:
        assert_resumed_exactly(rank, expected)
        assert rank["loaded_predictions"] == ranks[0]["saved_predictions"]
    for saved in (tmp_path / "model" / "model.pt", tmp_path / "checkpoint" / "model.pt",
                  tmp_path / "checkpoint" / "training_state.pt"):
        if state_dict_type == "full":
            assert saved.is_file()
        else:  # one file per rank, and the metadata
            assert sorted(p.name for p in saved.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    if state_dict_type == "full":  # gathered on rank 0 with the user model's keys: loads without FSDP
        model = HARNESS.make_model(initial_weights())
        model.load_state_dict(torch.load(tmp_path / "model" / "model.pt", weights_only=True))
        np.testing.assert_allclose(HARNESS.predict(model, PREDICT_X), ranks[0]["saved_predictions"], rtol=1e-6)


@pytest.mark.distributed
@pytest.mark.parametrize("state_dict_type", ["sharded", "full"])
def test_async_checkpoints_load_and_resume_like_blocking_ones(tmp_path, state_dict_type, rank_pool):
    """Sharded: DCP's async_save on every rank; full: gathered, then written by rank 0 in the background."""
    ranks = checkpoint_job(tmp_path, "async", state_dict_type, rank_pool)
    expected = single_process_weights(TRAIN)
    for rank in ranks:
        assert rank["published_at_return"] is False and rank["published_2_batches_on"] is False, \
            "training went on while the checkpoint was written"
        assert rank["first_published_when_second_started"] is True, "the second save waited for the first"
        assert_close(rank["weights"]["first"], expected)
        for name, value in rank["weights"]["sync"].items():  # the same weights as a blocking save's
            np.testing.assert_array_equal(rank["weights"]["async"][name], value, err_msg=name)
        assert not np.array_equal(rank["weights"]["async"]["w1"], expected["w1"])
        assert_resumed_exactly(rank, expected)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["checkpoint", "second", "sync"]
    for name in ("checkpoint", "second", "sync"):
        files = sorted(p.relative_to(tmp_path / name).as_posix() for p in (tmp_path / name).rglob("*") if p.is_file())
        if state_dict_type == "full":
            assert files == ["callback_states.json", "meta.json", "model.pt", "rank_state_00000.npz",
                             "rank_state_00001.npz", "trainer_state.json", "training_state.pt"], files
        else:  # DCP folders: one file per rank and the metadata
            assert [f for f in files if "/" in f] == [f"{folder}/{part}" for folder in ("model.pt", "training_state.pt")
                                                      for part in (".metadata", "__0_0.distcp", "__1_0.distcp")]
        meta = json.loads((tmp_path / name / "meta.json").read_text())
        assert sorted(meta["checksums"]) == [f for f in files if f != "meta.json"]
    # Byte for byte as the blocking save at the same point; DCP's .metadata names the (temporary) folder.
    differ = [] if state_dict_type == "full" else ["meta.json", "model.pt/.metadata", "training_state.pt/.metadata"]
    for path in (tmp_path / "sync").rglob("*"):
        name = path.relative_to(tmp_path / "sync").as_posix()
        if path.is_file() and name not in differ:
            assert path.read_bytes() == (tmp_path / "checkpoint" / name).read_bytes(), name


@pytest.mark.distributed
def test_a_failed_dcp_async_write_is_raised_on_every_rank_and_publishes_nothing(tmp_path, rank_pool):
    ranks = checkpoint_job(tmp_path, "async_error", "sharded", rank_pool)
    for rank in ranks:
        # raised by wait_for_checkpoint on every rank, with DCP's error (it failed on rank 1)
        assert rank["error"].startswith("AsyncCheckpointError: ") and "CheckpointException" in rank["error"]
        assert repr(str(tmp_path / "checkpoint")) in rank["error"]
        # the blocking checkpoint before it is still there, whole (its checksums are checked on load)
        assert rank["loaded_predictions"] == ranks[0]["saved_predictions"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["checkpoint"], "no temporary folder is left"


@pytest.mark.parametrize("options, error, message", [
    ({"state_dict_type": "zipped"}, ValueError, "state_dict_type"),
    ({"device_id": 0}, ValueError, "device="),
    ({"use_orig_params": False}, ValueError, "use_orig_params=True"),
])
def test_bad_torch_fsdp_kwargs_are_refused(options, error, message):
    model = HARNESS.make_model(initial_weights())
    with pytest.raises(error, match=message):
        create_driver("torch_fsdp", model, device=["cpu", "cpu"], torch_fsdp_kwargs=options)


def test_one_device_is_refused():
    with pytest.raises(ValueError, match="one device per rank"):
        create_driver("torch_fsdp", HARNESS.make_model(initial_weights()), device="cpu")


def test_fairscale_refuses_async_checkpoints():
    """Only torch FSDP of the sharded drivers writes asynchronously (DCP's async_save); DeepSpeed
    refuses alike (the same base class; not installed in this env)."""
    from fastcore_train.backends.torch.fairscale_driver import FairScalePersistence

    io = FairScalePersistence(driver=object())
    assert io.supports_snapshot is False
    with pytest.raises(NotImplementedError, match="only driver='torch_fsdp' saves asynchronously.*blocking=True"):
        io.begin_snapshot()
