"""Ray Train's own ``DataParallelTrainer`` with :class:`~fastcore_train.integrations.ray.RayBackendConfig`:
2 workers of a local Ray cluster form one data-parallel job of ``Trainer(device=None)``.

The session's Ray cluster (``ray_cluster`` in tests/conftest.py: 2 CPUs, this machine only), which
the docs/ray.md examples join too. jittor's refusal of Ray's workers is docs/ray.md's jittor example.
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.distributed.jobs.ray_job import train_loop
from tests.distributed.launchers import BACKENDS
from tests.distributed.test_data_parallel import SAMPLES, assert_close, rank_outputs, single_process_weights

pytestmark = pytest.mark.distributed

def fit(backend_name: str, config: dict, storage: Path, num_workers: int = 2, loop=train_loop):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from fastcore_train.integrations.ray import RayBackendConfig

    trainer = DataParallelTrainer(loop, train_loop_config={"backend": backend_name, **config},
                                  backend_config=RayBackendConfig(backend_name),
                                  scaling_config=ScalingConfig(num_workers=num_workers),
                                  run_config=RunConfig(name="fastcore", storage_path=str(storage)))
    return trainer.fit()


def test_two_ray_workers_form_one_job(ray_cluster, backend_name, harness, tmp_path):
    if backend_name == "jittor":
        pytest.skip("jittor's MPI cannot take Ray's workers as its ranks: docs/ray.md's jittor example shows the "
                    "refusal, run by the docs tests in this env")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    out.mkdir()
    started = time.perf_counter()
    result = fit(backend_name, {"out": str(out), "world_size": 2, "save_after_run": str(checkpoint)}, tmp_path / "ray")
    print(f"{backend_name}: 2 Ray workers trained in {time.perf_counter() - started:.1f} s")
    ranks = rank_outputs(out, 2)
    for rank in ranks:
        assert rank["driver"] == BACKENDS[backend_name].distributed_driver and rank["world_size"] == 2
        assert rank["global_forward_batches"] == 4  # each worker trained half of the 8 batches of 8
        assert rank["gathered"] == [{"rank": 0, "text": "xxx"}, {"rank": 1, "text": "xxxx"}]
    assert sorted(ranks[0]["seen"] + ranks[1]["seen"]) == list(range(SAMPLES))
    assert Counter(ranks[0]["seen"]) & Counter(ranks[1]["seen"]) == Counter(), "the workers split the data"
    for name in ranks[0]["weights"]:
        assert (ranks[0]["weights"][name] == ranks[1]["weights"][name]).all(), f"{name} differs between workers"
    assert_close(ranks[0]["weights"], single_process_weights(harness, 16))
    # The checkpoint went where the job said (not into Ray's run folder, each worker's working
    # directory), and the copy reported to Ray holds the same files.
    written = sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file())
    assert written and any(name.startswith("model") for name in written), written
    assert result.error is None and result.checkpoint is not None
    reported = Path(result.checkpoint.path)
    assert sorted(str(p.relative_to(reported)) for p in reported.rglob("*") if p.is_file()) == written

    if backend_name == "oneflow":
        # oneflow imported at the top of the function's module: Ray loads it in another thread than
        # the one it trains in, where oneflow has no scope. The error says to import it inside.
        from tests.distributed.jobs.ray_oneflow_top import train_loop as imported_at_top

        with pytest.raises(Exception) as raised:
            fit("oneflow", {}, tmp_path / "ray-top", loop=imported_at_top)
        assert "import oneflow inside the training function" in str(raised.value), str(raised.value)[-3000:]
