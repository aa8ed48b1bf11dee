"""The paddle driver's words for paddle 3.3's gloo start-up race and for a peer that advertised loopback
across machines, and nothing else rewritten."""
from __future__ import annotations

from fastcore_train.backends.paddle.world import explain_gloo_start_failure

# As paddle 3.3.1 raised it from fleet.init with 4 CPU ranks on 2 cores (fleet/base/topology.py, new_group).
REFUSED = RuntimeError("[/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:784] connect [127.0.0.1]:9141: "
                       "Connection refused")


def test_the_gloo_race_is_named_with_what_to_do():
    clearer = explain_gloo_start_failure(REFUSED, 4, {"PADDLE_MASTER": "127.0.0.1:6170", "PADDLE_LOCAL_SIZE": "4"})
    assert isinstance(clearer, RuntimeError) and clearer is not REFUSED
    message = str(clearer)
    assert "4 gloo (CPU) ranks" in message and "pair.cc:784" in message and "Connection refused" in message
    assert "twice on the same store keys" in message and "2 CPU ranks" in message and "docs/backends/paddle.md" in message


def test_a_loopback_peer_across_machines_is_named_as_the_advertised_address_not_the_race():
    # What a rank on node1 raised across two hosts (tests/distributed/test_two_hosts_ray.py) with the interface
    # choice turned off: node0's rank had advertised its hostname's 127.0.0.1.
    refused = RuntimeError("[/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:784] connect [127.0.0.1]:17283: "
                           "Connection refused")
    across = {"PADDLE_MASTER": "10.0.0.1:6170", "PADDLE_LOCAL_SIZE": "1"}
    message = str(explain_gloo_start_failure(refused, 2, across))
    assert "span several machines" in message and "127.0.0.1" in message and "GLOO_SOCKET_IFNAME" in message
    assert "unset" in message and "twice on the same store keys" not in message
    # the same failure on one machine (a loopback master, or every rank local) is the race
    for here in ({"PADDLE_MASTER": "127.0.0.1:6170", "PADDLE_LOCAL_SIZE": "1"},
                 {"PADDLE_MASTER": "10.0.0.1:6170", "PADDLE_LOCAL_SIZE": "4"}, {}):
        assert "twice on the same store keys" in str(explain_gloo_start_failure(refused, 4, here)), here
    # across machines, a peer's real address is the race too
    real = RuntimeError("[/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:784] connect [10.0.0.2]:9141: "
                        "Connection refused")
    assert "twice on the same store keys" in str(explain_gloo_start_failure(real, 4, across))


def test_other_errors_are_left_as_they_are():
    other = RuntimeError("The unique key 0 already exists in the map.")
    assert explain_gloo_start_failure(other, 4) is other


def test_a_paddlejob_pod_without_paddles_launcher_is_refused_before_anything_is_built(monkeypatch):
    # What the Kubeflow PaddleJob operator sets in a pod of a 2-node job: its node count and master, for
    # paddle's launcher to read; `python train.py` without the launcher must not train alone as a world of 1.
    import numpy as np
    import paddle
    import pytest
    from paddle.io import DataLoader, TensorDataset

    from fastcore_train import Trainer
    from fastcore_train.parallel.environment import UnlaunchedNodeError

    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("PADDLE_MASTER", "train-worker-0:37777")
    monkeypatch.setenv("PADDLE_NNODES", "2")
    data = TensorDataset([paddle.to_tensor(np.zeros((4, 2), "float32")), paddle.to_tensor(np.zeros(4, "int64"))])
    model = paddle.nn.Linear(2, 2)
    with pytest.raises(UnlaunchedNodeError, match=r"PADDLE_NNODES=2 .* python -m paddle.distributed.launch"):
        Trainer(model, train_dataloader=DataLoader(data, batch_size=2), driver="paddle", device=None,
                optimizers=paddle.optimizer.SGD(parameters=model.parameters()), progress_bar=None)
