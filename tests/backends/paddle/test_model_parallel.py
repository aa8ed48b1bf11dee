"""driver="paddle_model_parallel" (tensor parallel on paddle's auto-parallel ProcessMesh) with a real
2-rank job on CPU.

One launch (:mod:`tests.backends.paddle.scripts.model_parallel_job`) runs every distributed case;
the single-process references (driver="paddle") are computed here. The argument checks run in-process.
"""
from __future__ import annotations

import numpy as np
import paddle
import pytest

from fastcore_train.backends.paddle import create_driver
from fastcore_train.backends.paddle.model_parallel_driver import PaddleModelParallelDriver, resolve_plan
from fastcore_train.convert import convert_checkpoint, load_neutral_weights
from fastcore_train.parallel.environment import RankFacts
from tests.backends.paddle.scripts import model_parallel_job as job
from tests.backends.paddle.scripts.model_parallel_job import (CLIP_STEPS, CLIPS, MLP, PLAN, SAVE_AT, STEPS, build_trainer,
                                                              full_weights)
from tests.backends.model_parallel_jobs import StepLosses, assert_weights_within, rank_records, run_self_launched


def single_process(resume_from=None, **variant):
    """Losses, full weights and evaluation results of the run on one process (driver="paddle")."""
    losses = StepLosses()
    trainer = build_trainer("paddle", "cpu", [losses], **variant)
    trainer.run(num_eval_sanity_batch=0, resume_from=resume_from)
    return {"losses": losses.losses, "weights": full_weights(trainer), "results": trainer.evaluator.run()}



@pytest.mark.distributed
def test_two_ranks_tp2_and_dp2_match_one_process_and_checkpoints_resume_anywhere(tmp_path):
    done = run_self_launched(job.__file__, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = rank_records(tmp_path)
    expected = single_process()
    assert len(expected["losses"]) == STEPS
    # tp2: each rank holds half of fc1 (column-wise: [in, out/2]) and of fc2's weight (row-wise: [in/2, out]);
    # tp1 (dp=2): whole weights, each rank half of each batch; either way every rank sees the whole batch's loss
    shapes = {2: {"fc1.weight": [12, 16], "fc1.bias": [16], "fc2.weight": [16, 4], "fc2.bias": [4]},
              1: {"fc1.weight": [12, 32], "fc1.bias": [32], "fc2.weight": [32, 4], "fc2.bias": [4]}}
    for tp_size, dp_shards in ((2, [[1, 0], [1, 0]]), (1, [[2, 0], [2, 1]])):
        case = f"tp{tp_size}"
        assert [rank[case]["dp"] for rank in ranks] == dp_shards, "a tp group reads the same batches"
        for rank in ranks:
            assert rank[case]["driver"] == "PaddleModelParallelDriver"
            assert rank[case]["local_shapes"] == shapes[tp_size]
            np.testing.assert_allclose(rank[case]["losses"], expected["losses"], atol=1e-5, rtol=0, err_msg=case)
            assert_weights_within(rank[case]["weights"], expected["weights"])
            assert rank[case]["results"] == pytest.approx(expected["results"]) and expected["results"]
    for name, clip in CLIPS.items():
        reference = single_process(clip=clip, steps=CLIP_STEPS)["weights"]
        unclipped = single_process(clip={"clip_value": 1e9}, steps=CLIP_STEPS)["weights"]
        assert not np.allclose(unclipped["fc1.weight"], reference["fc1.weight"], atol=1e-3), f"{name} did nothing"
        for rank in ranks:
            assert_weights_within(rank[name]["weights"], reference)

    # the tp=2 checkpoint (step SAVE_AT) is a plain paddle checkpoint: it resumes on the same mesh and on one process
    folder = tmp_path / "checkpoint"
    for rank in ranks:
        assert rank["resumed_tp2"]["batches"] == STEPS
        assert_weights_within(rank["resumed_tp2"]["weights"], expected["weights"])
    resumed = single_process(resume_from=folder)
    assert len(resumed["losses"]) == STEPS - SAVE_AT
    assert_weights_within(resumed["weights"], expected["weights"])
    model = MLP()  # and it converts like any other
    load_neutral_weights(model, convert_checkpoint(folder, tmp_path / "mlp.safetensors", to="neutral"))
    saved = paddle.load(str(folder / "model.pdparams"))
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), np.asarray(saved[name]), err_msg=name)


def test_plan_and_arguments_are_checked():
    with pytest.raises(ValueError, match="matches no module"):
        resolve_plan(MLP(), {"fc3": "colwise"})
    with pytest.raises(ValueError, match="use one of colwise, rowwise"):
        resolve_plan(MLP(), {"fc1": "sequence"})
    assert sorted(resolve_plan(MLP(), {"fc*": "colwise"})) == ["fc1", "fc2"]
    with pytest.raises(ValueError, match="no 2-D weight"):
        resolve_plan(paddle.nn.Sequential(paddle.nn.LayerNorm(4)), {"0": "colwise"})
    model = MLP()
    with pytest.raises(ValueError, match="one device per rank"):
        create_driver("paddle_model_parallel", model, device="cpu", paddle_model_parallel_kwargs={"tp_plan": PLAN})
    with pytest.raises(ValueError, match="is for driver='paddle_model_parallel'"):
        create_driver("paddle", model, device="cpu", paddle_model_parallel_kwargs={"tp_plan": PLAN})
    two = RankFacts(rank=0, local_rank=0, world_size=2)
    with pytest.raises(ValueError, match="must divide the world size"):
        PaddleModelParallelDriver(model, "cpu", two, paddle_model_parallel_kwargs={"tp_size": 3, "tp_plan": PLAN})
    with pytest.raises(ValueError, match="does not take tp_degree"):
        PaddleModelParallelDriver(model, "cpu", two, paddle_model_parallel_kwargs={"tp_degree": 2})
    with pytest.raises(ValueError, match="needs tp_plan"):
        PaddleModelParallelDriver(model, "cpu", two, paddle_model_parallel_kwargs={"tp_size": 2})
    driver = PaddleModelParallelDriver(model, "cpu", two, paddle_model_parallel_kwargs={"tp_plan": PLAN})
    assert (driver.tp_size, driver.dp_size, driver.io.collective_save) == (2, 1, True)
