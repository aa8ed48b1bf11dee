"""What only oneflow's data parallel has: ``no_sync``, which oneflow 0.9's DDP lacks and the driver
builds on DDP's hooks. Everything it shares with the other backends is tested in ``tests/distributed``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import oneflow as flow
import pytest

from fastcore_train import Trainer
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.harnesses.oneflow import Harness
from tests.distributed.launchers import BACKENDS, run_job

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "scripts" / "no_sync_job.py"
HARNESS = Harness()


def test_accumulation_with_no_sync_matches_the_global_batch(tmp_path):
    done = run_job(BACKENDS["oneflow"], JOB, {"out": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(2)]
    x, y = make_data(64, seed=4)
    expected = HARNESS.make_model(initial_weights())
    Trainer(expected, HARNESS.make_dataloader(x, y, 16), HARNESS.make_sgd(expected, 0.1), driver="oneflow",
            n_epochs=1, progress_bar=None).run(num_eval_sanity_batch=0)
    for index, rank in enumerate(ranks):
        for name, value in HARNESS.get_weights(expected).items():
            np.testing.assert_allclose(rank["weights"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
        # Inside no_sync each rank kept the gradient of its own 4 samples: nothing was averaged.
        model = HARNESS.make_model({k: np.array(v, dtype=np.float32) for k, v in rank["weights"].items()})
        xs, ys = flow.from_numpy(x[index * 4:(index + 1) * 4]), flow.from_numpy(y[index * 4:(index + 1) * 4])
        flow.nn.functional.cross_entropy(model(xs), ys).backward()
        np.testing.assert_allclose(np.array(rank["probe"]), model.fc1.weight.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert not np.allclose(ranks[0]["probe"], ranks[1]["probe"])


def test_nccl_interface_follows_the_route_rule_unless_the_user_set_it():
    """oneflow reads its rank facts at import, but NCCL reads its interface only when GPU ranks first talk: the
    driver sets it as every backend does (loopback for a job on this machine), a user's own value kept."""
    from fastcore_train.backends.oneflow.world import choose_transport_interface
    from fastcore_train.parallel.loopback import loopback_interface

    environ = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("NCCL_SOCKET_IFNAME", raising=False)
        for name, value in environ.items():
            patch.setenv(name, value)
        assert choose_transport_interface(2) == {"NCCL_SOCKET_IFNAME": loopback_interface()}
        patch.setenv("NCCL_SOCKET_IFNAME", "eth7")
        assert choose_transport_interface(2) == {}
