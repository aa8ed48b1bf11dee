"""driver="torch_model_parallel" (tensor parallel + FSDP2 on a device mesh) with real 2-rank jobs on CPU.

One launch (:mod:`tests.backends.torch.scripts.model_parallel_job`) runs every distributed case;
the single-process references are computed here. The argument checks run in-process.
"""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from fastcore_train.backends.torch import create_driver
from fastcore_train.backends.torch.torch_model_parallel_driver import resolve_plan
from fastcore_train.checkpoint import META_FILE
from fastcore_train.convert import convert_checkpoint, load_neutral_weights
from tests.backends.torch.scripts import model_parallel_job as job
from tests.backends.torch.scripts.model_parallel_job import (BATCH, MLP, SAVE_AT, STEPS, VARIANTS, Block, build_trainer,
                                                             full_weights, predictions)
from tests.backends.model_parallel_jobs import StepLosses, assert_weights_within, rank_records, run_self_launched


def single_process(model_name, resume_from=None, **variant):
    """Losses, full weights, evaluation results and predictions of the run on one process (driver="torch")."""
    losses = StepLosses()
    trainer = build_trainer(model_name, "torch", "cpu", BATCH, [losses], **variant)
    trainer.run(num_eval_sanity_batch=0, resume_from=resume_from)
    if variant:  # (the variants are compared by losses and weights)
        return {"losses": losses.losses, "weights": full_weights(trainer)}
    return {"losses": losses.losses, "weights": full_weights(trainer), "results": trainer.evaluator.run(),
            "predictions": predictions(trainer)}



@pytest.mark.distributed
def test_two_ranks_tp_and_fsdp2_match_one_process_and_checkpoints_reshard(tmp_path):
    done = run_self_launched(job.__file__, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = rank_records(tmp_path)
    for model_name in ("mlp", "block"):
        expected = single_process(model_name)
        assert len(expected["losses"]) == STEPS
        for tp_size, dp_shards in ((2, [[1, 0], [1, 0]]), (1, [[2, 0], [2, 1]])):
            case = f"{model_name}_tp{tp_size}"
            assert [rank[case]["dp"] for rank in ranks] == dp_shards, "a tp group reads the same batches"
            if tp_size == 2:  # both ranks computed the whole batch's loss
                per_step = [rank[case]["losses"] for rank in ranks]
                assert per_step[0] == per_step[1]
                per_step = per_step[0]
            else:  # each rank the mean over its half of the batch
                per_step = np.mean([rank[case]["losses"] for rank in ranks], axis=0)
            np.testing.assert_allclose(per_step, expected["losses"], atol=1e-5, rtol=0, err_msg=case)
            for rank in ranks:
                assert rank[case]["driver"] == "TorchModelParallelDriver"
                assert_weights_within(rank[case]["weights"], expected["weights"])
                assert rank[case]["results"] == pytest.approx(expected["results"]) and expected["results"]
                np.testing.assert_allclose(rank[case]["predictions"], expected["predictions"], atol=1e-5)

    for name, variant in VARIANTS.items():
        variant = {key: value for key, value in variant.items() if key not in ("tp_size", "accumulation_steps", "meta")}
        expected = single_process("mlp", **variant)
        dp_size = 2 // VARIANTS[name]["tp_size"]
        micro = np.array([rank[name]["losses"] for rank in ranks]).reshape(2, STEPS, -1)  # rank, step, micro-batch
        per_step = micro.mean(axis=(0, 2)) if dp_size == 2 else micro[0].mean(axis=1)
        if "fp16" in variant:  # bfloat16 autocast: another summation order; AdamW then takes the weights apart
            np.testing.assert_allclose(per_step, expected["losses"], rtol=0, atol=2e-2, err_msg=name)
            continue
        np.testing.assert_allclose(per_step, expected["losses"], rtol=0, atol=1e-5, err_msg=name)
        for rank in ranks:
            assert_weights_within(rank[name]["weights"], expected["weights"])
            assert rank[name]["on_meta"] == bool(VARIANTS[name].get("meta")), name  # built without weights
        if "clip" in variant:
            unclipped = single_process("mlp", clip={"clip_value": 1e9})["weights"]["fc1.weight"]
            assert not np.allclose(unclipped, expected["weights"]["fc1.weight"], atol=1e-3), f"{name}: clipping did nothing"

    # (dp=1, tp=2) checkpoint at step SAVE_AT: DCP folders inside our layout, with their checksums
    folder = tmp_path / "checkpoint"
    for name in ("model.pt", "training_state.pt"):
        assert sorted(p.name for p in (folder / name).iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    meta = json.loads((folder / META_FILE).read_text())
    assert any(path.startswith("model.pt/") for path in meta["checksums"]), meta["checksums"]
    uninterrupted = single_process("block")["weights"]
    for rank in ranks:  # resumed on (dp=2, tp=1)
        assert rank["resumed_dp2"]["batches"] == STEPS
        assert_weights_within(rank["resumed_dp2"]["weights"], uninterrupted)
    resumed = single_process("block", resume_from=folder)  # resumed on one process, driver="torch"
    assert len(resumed["losses"]) == STEPS - SAVE_AT
    assert_weights_within(resumed["weights"], uninterrupted)
    assert_converts(folder, tmp_path)


def assert_converts(folder, tmp_path):
    """The sharded checkpoint converts like any other: to neutral weights, and (with paddle) a whole checkpoint."""
    loaded = build_trainer("block", "torch", "cpu", BATCH)
    loaded.load_checkpoint(folder, resume_training=False)
    model = Block()
    load_neutral_weights(model, convert_checkpoint(folder, tmp_path / "block.safetensors", to="neutral"))
    assert_weights_within({k: v.tolist() for k, v in model.state_dict().items()}, full_weights(loaded), atol=0)
    if importlib.util.find_spec("paddle") is not None:  # optimizer state too (AdamW's moments, by index)
        converted = convert_checkpoint(folder, tmp_path / "paddle", to="paddle")
        assert json.loads((converted / META_FILE).read_text())["optimizers"] == ["paddle.optimizer.adamw.AdamW"]


def test_plan_names_and_styles_are_checked():
    with pytest.raises(ValueError, match="matches no module"):
        resolve_plan(MLP(), {"fc3": "colwise"})
    with pytest.raises(ValueError, match="use one of colwise, rowwise"):
        resolve_plan(MLP(), {"fc1": "diagonal"})
    with pytest.raises(ValueError, match="has none"):
        resolve_plan(MLP(), "auto")
    assert sorted(resolve_plan(Block(), {"attn.*": "colwise"})) == ["attn.*"]


def test_driver_arguments_are_checked():
    model = MLP()
    with pytest.raises(ValueError, match="one device per rank"):
        create_driver("torch_model_parallel", model, device="cpu")
    with pytest.raises(ValueError, match="must divide the world size"):
        create_driver("torch_model_parallel", model, device=["cpu", "cpu"],
                      torch_model_parallel_kwargs={"tp_size": 3, "tp_plan": {"fc1": "colwise"}})
    with pytest.raises(ValueError, match="does not take tp_degree"):
        create_driver("torch_model_parallel", model, device=["cpu", "cpu"], torch_model_parallel_kwargs={"tp_degree": 2})
    with pytest.raises(TypeError, match="fsdp_layers must be a list of class names"):
        create_driver("torch_model_parallel", model, device=["cpu", "cpu"],
                      torch_model_parallel_kwargs={"tp_size": 1, "fsdp_layers": 3})
    driver = create_driver("torch_model_parallel", model, device=["cpu", "cpu"],
                           torch_model_parallel_kwargs={"tp_plan": {"fc1": "colwise", "fc2": "rowwise"}})
    assert (driver.tp_size, driver.dp_size, driver.state_dict_type) == (2, 1, "sharded")


def test_a_model_on_the_meta_device_needs_its_initial_weights(tmp_path):
    import torch

    with torch.device("meta"):
        model = MLP()
    with pytest.raises(ValueError, match="on the meta device.*init_weights"):
        create_driver("torch_model_parallel", model, device=["cpu", "cpu"], torch_model_parallel_kwargs={"tp_size": 1})
    with pytest.raises(FileNotFoundError, match="no such file"):
        create_driver("torch_model_parallel", model, device=["cpu", "cpu"],
                      torch_model_parallel_kwargs={"tp_size": 1, "init_weights": str(tmp_path / "missing.safetensors")})
    with pytest.raises(TypeError, match="init_weights must be a weights file or a function"):
        create_driver("torch_model_parallel", model, device=["cpu", "cpu"],
                      torch_model_parallel_kwargs={"tp_size": 1, "init_weights": 3})
