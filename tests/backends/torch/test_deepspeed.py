"""DeepSpeed (ZeRO stages 0-3) with real processes on CPU (gloo): self-launched and under torchrun."""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("deepspeed") is None:
    # Skipped where deepspeed is not installed, unless the environment is meant to test it.
    if os.environ.get("FASTCORE_TRAIN_REQUIRE_DEEPSPEED"):
        raise ImportError("FASTCORE_TRAIN_REQUIRE_DEEPSPEED is set but deepspeed is not installed.")
    pytest.skip('driver="deepspeed" needs deepspeed (DS_BUILD_OPS=0 pip install deepspeed)', allow_module_level=True)

import torch  # noqa: E402

from fastcore_train import Accuracy, Evaluator, Trainer  # noqa: E402
from fastcore_train.backends.torch.deepspeed_driver import TorchDeepSpeedDriver, build_config  # noqa: E402
from fastcore_train.parallel.environment import RankFacts  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.torch import Harness  # noqa: E402
from tests.backends.torch.scripts import deepspeed_job  # noqa: E402
from tests.processes import run_process_tree  # noqa: E402

pytestmark = pytest.mark.distributed

FLAGAI_JOB = Path(__file__).parent / "scripts" / "flagai_deepspeed_job.py"
#: FlagAI's own config (FlagAI-Open/FlagAI, examples/glm_title_generation/deepspeed.json).
FLAGAI_CONFIG = Path(__file__).parent / "data" / "flagai_deepspeed.json"


def flagai_config() -> dict:
    return json.loads(FLAGAI_CONFIG.read_text())
HARNESS = Harness()
STAGES = [0, 1, 2, 3]
# The first DeepSpeed start on a machine compiles a C++ op (minutes on 2 cores); later ones load it.
BUILD_TIMEOUT = 480


def run(command: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``command`` in a session of its own, so that on timeout it is killed with every process
    it started (ranks, compilers)."""
    return run_process_tree(command, timeout)


@functools.cache
def build_op(builder_name: str) -> None:
    """Build a DeepSpeed CPU op once (cached in ~/.cache/torch_extensions) before the first job
    that needs it, so that the jobs' time limits and timings measure the jobs themselves."""
    code = ("from deepspeed.accelerator import get_accelerator\n"
            f"builder = get_accelerator().create_op_builder({builder_name!r})\n"
            "builder is None or builder.load()\n")
    done = run([sys.executable, "-c", code], timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]


def build_comm_op() -> None:
    """DeepSpeed's CPU communication op, which every job loads."""
    build_op("ShareMemCommBuilder")


def run_job(pools, config: dict, nproc: int = 2, timeout: float = 120) -> None:
    """Run the DeepSpeed job on the ranks of the session's pool of ``nproc`` (torchrun's 2 ranks, or one
    plain process: no launcher, a DeepSpeed world of one); a failing job fails the test with its output."""
    build_comm_op()
    pools.get(nproc).run(deepspeed_job.main, {"device": None if nproc > 1 else "cpu", **config}, timeout=timeout)


def outputs(folder: Path, stage: int, world_size: int) -> list[dict]:
    prefix = folder / f"stage_{stage}_rank_"
    return [{**json.loads(Path(f"{prefix}{r}.json").read_text()), "weights": dict(np.load(f"{prefix}{r}.npz"))}
            for r in range(world_size)]


def single_process_weights(global_batch: int, n_epochs: int, momentum: float, shuffle: bool) -> dict:
    x, y = make_data(64, seed=4)
    model = HARNESS.make_model(initial_weights())
    Trainer(model, HARNESS.make_dataloader(x, y, global_batch, shuffle=shuffle), HARNESS.make_sgd(model, 0.1, momentum),
            driver="torch", n_epochs=n_epochs, progress_bar=None).run(num_eval_sanity_batch=0)
    return HARNESS.get_weights(model)


def assert_close(actual: dict, expected: dict, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=atol, err_msg=name)


def state_dict_weights(path: Path) -> dict:
    state = torch.load(path, weights_only=True)
    return {"w1": state["fc1.weight"].numpy().T, "b1": state["fc1.bias"].numpy(),
            "w2": state["fc2.weight"].numpy().T, "b2": state["fc2.bias"].numpy()}


def test_every_zero_stage_matches_one_process_on_the_global_batch(tmp_path, rank_pools):
    """2 ranks x batch 4 x 2 accumulated micro-batches = one process on batch 16, for ZeRO 0-3;
    evaluation (unevenly split: 21 and 20 samples) and save_model agree too."""
    models = tmp_path / "models"
    run_job(rank_pools, {"out": str(tmp_path), "stages": STAGES, "batch_size": 4, "accumulation_steps": 2,
                         "n_epochs": 2, "shuffle": True, "momentum": 0.9, "evaluate": 41, "save_model": str(models)})
    expected = single_process_weights(16, n_epochs=2, momentum=0.9, shuffle=True)
    ex, ey = make_data(41, seed=9)
    for stage in STAGES:
        ranks = outputs(tmp_path, stage, 2)
        for rank in ranks:
            assert (rank["driver"], rank["world_size"], rank["zero_stage"]) == ("TorchDeepSpeedDriver", 2, stage)
            assert rank["global_forward_batches"] == 16
            assert_close(rank["weights"], expected)
        evaluated = Evaluator(HARNESS.make_model(ranks[0]["weights"]), {"dev": HARNESS.make_dataloader(ex, ey, 5)},
                              {"acc": Accuracy()}, input_mapping={"y": "target"}, verbose=0).run()
        assert ranks[0]["results"] == ranks[1]["results"] == evaluated
        saved = models / f"stage_{stage}"
        assert [p.name for p in saved.iterdir()] == ["model.pt"], "rank 0 alone writes a plain state dict"
        assert_close(state_dict_weights(saved / "model.pt"), ranks[0]["weights"], rtol=0, atol=0)


def test_a_checkpoint_resumes_exactly(tmp_path, rank_pools):
    """Checkpoint after batch 3 of 8, resume in new Trainers: the same final weights (momentum, data order
    and ZeRO shards restored) as the uninterrupted run, for ZeRO 0-3."""
    first, second, checkpoints = tmp_path / "first", tmp_path / "second", tmp_path / "ckpt"
    first.mkdir(), second.mkdir()
    common = {"stages": STAGES, "batch_size": 8, "n_epochs": 2, "shuffle": True, "momentum": 0.9}
    run_job(rank_pools, {**common, "out": str(first), "save_at": 3, "save_to": str(checkpoints)})
    run_job(rank_pools, {**common, "out": str(second), "resume_from": str(checkpoints)})
    expected = single_process_weights(16, n_epochs=2, momentum=0.9, shuffle=True)
    for stage in STAGES:
        folder = checkpoints / f"stage_{stage}"
        assert (folder / "model.pt").is_file() and (folder / "training_state.pt" / "latest").is_file()
        shards = sorted(p.name for p in (folder / "training_state.pt").glob("*/*optim_states.pt"))
        assert len(shards) == (2 if stage else 0), shards
        for uninterrupted, resumed in zip(outputs(first, stage, 2), outputs(second, stage, 2)):
            assert resumed["global_forward_batches"] == 8
            assert_close(uninterrupted["weights"], expected)
            assert_close(resumed["weights"], uninterrupted["weights"], rtol=1e-6, atol=1e-7)


def test_one_process_is_a_deepspeed_world_of_one(tmp_path, rank_pools):
    """No launcher, one device: DeepSpeed runs as a world of one. Trainer.load_model puts weights
    back into ZeRO's fp32 master copy too: training the same epoch again ends on the same weights."""
    run_job(rank_pools, {"out": str(tmp_path), "stages": [2, 3], "batch_size": 8, "accumulation_steps": 2,
                         "reload": True}, nproc=1)
    expected = single_process_weights(16, n_epochs=1, momentum=0.0, shuffle=False)
    for stage in (2, 3):
        (rank,) = outputs(tmp_path, stage, 1)
        assert (rank["world_size"], rank["zero_stage"], rank["global_forward_batches"]) == (1, stage, 16)
        assert_close(rank["weights"], expected)


def test_config_defaults_suit_the_trainer():
    config = build_config({"zero_optimization": {"stage": 2}}, fp16=True, on_cuda=False)
    assert config == {"zero_optimization": {"stage": 2}, "gradient_accumulation_steps": 1,
                      "train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
                      "gradient_clipping": 0.0}, "no DeepSpeed half precision on CPU"
    assert build_config(None, fp16=True, on_cuda=True)["fp16"] == {"enabled": True, "auto_cast": True}
    assert "fp16" not in build_config({"bf16": {"enabled": True}}, fp16=True, on_cuda=True)
    assert build_config({"fp16": {"enabled": False}}, fp16=True, on_cuda=True)["fp16"] == {"enabled": False}
    assert build_config({"gradient_clipping": 1.0, "train_batch_size": 32}, False, False) == {
        "gradient_clipping": 1.0, "train_batch_size": 32, "gradient_accumulation_steps": 1,
        "zero_allow_untested_optimizer": True}


def test_config_may_be_a_json_file(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    assert build_config(path, fp16=False, on_cuda=False)["zero_optimization"] == {"stage": 3}
    with pytest.raises(FileNotFoundError, match="No DeepSpeed config file"):
        build_config(tmp_path / "missing.json", fp16=False, on_cuda=False)


def test_config_conflicting_with_the_trainer_is_refused():
    with pytest.raises(ValueError, match="Trainer\\(accumulation_steps=n\\)"):
        build_config({"gradient_accumulation_steps": 4}, fp16=False, on_cuda=False)


def test_an_fp16_section_casts_the_float_batches():
    """FlagAI's fp16 section has no auto_cast (FlagAI casts inputs itself); without it DeepSpeed's
    half model meets the Trainer's float batches ("Input type (float) and bias type (c10::Half)")."""
    config = {**flagai_config(), "fp16": {"enabled": True, "loss_scale": 0}}
    for on_cuda in (False, True):
        assert build_config(config, fp16=False, on_cuda=on_cuda)["fp16"] == {"enabled": True, "loss_scale": 0,
                                                                            "auto_cast": True}
    assert build_config({"fp16": {"enabled": True, "auto_cast": False}}, False, False)["fp16"]["auto_cast"] is False
    assert "auto_cast" not in build_config(flagai_config(), fp16=False, on_cuda=False)["fp16"]  # not enabled


def test_optimizer_comes_from_the_trainer_or_the_config_section():
    model = HARNESS.make_model(initial_weights())
    world = RankFacts(rank=0, local_rank=0, world_size=1)
    with_section = TorchDeepSpeedDriver(model, "cpu", world, deepspeed_kwargs={"config": str(FLAGAI_CONFIG)})
    with pytest.raises(ValueError, match="pass optimizers=None to have DeepSpeed build the config's optimizer"):
        with_section.set_optimizers(HARNESS.make_sgd(model, 0.1))
    with_section.set_optimizers(None)
    assert with_section.optimizers == []  # DeepSpeed builds it at set-up
    with pytest.raises(ValueError, match="or pass optimizers=None with an 'optimizer' section"):
        TorchDeepSpeedDriver(model, "cpu", world).set_optimizers(None)


def test_flagai_deepspeed_json_trains_on_two_cpu_ranks(tmp_path):
    """FlagAI's examples/glm_title_generation/deepspeed.json (ZeRO-3, cpu_offload, an Adam "optimizer"
    section, an fp16 section, here enabled where the CPU can) as a FlagAI script passes it: EnvArgs flags on
    the command line, Trainer(optimizers=None). DeepSpeed builds its CPU Adam; the model summary counts the
    real parameters of the partitioned model; both ranks train to the same weights."""
    build_comm_op()
    build_op("CPUAdamBuilder")  # ZeRO-Offload's Adam: DeepSpeedCPUAdam (2.5 CPU-minutes to compile here)
    flagai = flagai_config()
    # As in FlagAI's gpt2_title_generation and glm_seq2seq configs. DeepSpeed's CPU accelerator takes fp16
    # only where oneDNN has fp16 kernels (AVX512-FP16 or AMX CPUs); elsewhere it refuses ("Type fp16 is not
    # supported on your device"), so the section stays off there and the run trains in float32.
    fp16 = bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    flagai["fp16"]["enabled"] = fp16
    flagai["zero_optimization"]["stage3_param_persistence_threshold"] = 0  # partition even this tiny model
    config = tmp_path / "deepspeed.json"
    config.write_text(json.dumps(flagai))
    command = [sys.executable, str(FLAGAI_JOB), "--env_type=deepspeed", "--num_gpus=2", "--pytorch_device=cpu",
               f"--deepspeed_config={config}", "--epochs=2", "--batch_size=4", f"--out={tmp_path}"]
    done = run(command, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(2)]
    real = sum(array.size for array in initial_weights().values())
    assert f"{real} total parameters" in done.stdout + done.stderr, "the Trainer's model summary"
    for rank in ranks:
        assert (rank["world_size"], rank["zero_stage"], rank["optimizer"]) == (2, 3, "DeepSpeedCPUAdam")
        assert rank["param_dtype"] == ("torch.float16" if fp16 else "torch.float32")
        assert rank["summary_params"] == real and rank["placeholders"] == 4  # every parameter partitioned
        assert len(rank["losses"]) == 16 and np.isfinite(rank["losses"]).all()  # 64 samples / 2 ranks / 4, 2 epochs
    assert ranks[0]["weights"] == ranks[1]["weights"]
    initial = HARNESS.make_model(initial_weights()).state_dict()
    assert not np.allclose(ranks[0]["weights"]["fc1.weight"], initial["fc1.weight"].numpy(), rtol=0, atol=1e-7)


def test_bad_arguments_are_refused_before_any_process_starts():
    model = HARNESS.make_model(initial_weights())
    world = RankFacts(rank=0, local_rank=0, world_size=1)
    with pytest.raises(TypeError, match="deepspeed_kwargs"):
        TorchDeepSpeedDriver(model, "cpu", world, deepspeed_kwargs={"zero_optimization": {"stage": 2}})
    driver = TorchDeepSpeedDriver(model, "cpu", world)
    with pytest.raises(ValueError, match="exactly one optimizer"):
        driver.set_optimizers([HARNESS.make_sgd(model, 0.1), HARNESS.make_sgd(model, 0.1)])


def test_gradient_clipping_points_to_the_deepspeed_config():
    """DeepSpeed clips inside engine.step(), so the driver refuses and says which config key to set."""
    model = HARNESS.make_model(initial_weights())
    driver = TorchDeepSpeedDriver(model, "cpu", RankFacts(rank=0, local_rank=0, world_size=1))
    with pytest.raises(NotImplementedError, match=r"'gradient_clipping': 0\.5"):
        driver.clip_grad_norm(0.5)
    with pytest.raises(NotImplementedError, match="only clips by global 2-norm.*gradient_clipping"):
        driver.clip_grad_value(0.5)
