"""Ray across two hosts (network namespaces on this machine: tests/distributed/two_hosts.py): a Ray
head on node0 (``ray start --head --node-ip-address <node0>``), a worker node joining it from node1
(``ray start --address <node0>:<port> --node-ip-address <node1>``), 2 CPUs each, and a driver on
node0 fitting Ray Train's ``DataParallelTrainer`` with ``RayBackendConfig`` twice on one cluster:
2 workers of 1 CPU placed one per node (``STRICT_SPREAD``), then 4 placed two per node. The
hostname resolves to 127.0.0.1 on both hosts. Each worker runs on the node it should, trains its
share of the batches, the weights end equal on both and equal to one process's on
the global batch, and each worker's gloo interface is its link, its connections leaving from its
link address, some of them to the other host.

The two Ray nodes share this machine's filesystem: each has its own ``--temp-dir`` (its session
folder, sockets and logs) and Ray's processes of each node live in its namespace, killed with it
(``ray stop`` is not used: it stops every Ray process of the machine, whatever its namespace).
"""
from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from tests.distributed import two_hosts
from tests.distributed.launchers import job_environment
from tests.distributed.test_two_hosts import BATCH, EPOCHS, INTERFACE_VARIABLES, JOB, ROOT, SAMPLES

pytestmark = pytest.mark.distributed

DRIVER = Path(__file__).parent / "jobs" / "ray_two_hosts_driver.py"
PORT = 6390
#: Per node: the object store's size (Ray's minimum is 75 MB; the default takes 30% of the memory).
OBJECT_STORE = str(100 * 1024 * 1024)


def environment(token: Path) -> dict[str, str]:
    """Every Ray process's (both nodes', the driver's): token authentication on, with this test's own
    token. Left unset, Ray 2.60's head turns it on by itself when ``~/.ray/auth_token`` exists while a
    joining node does not, and the join fails with ``InvalidAuthToken`` (docs/multinode.md, Ray)."""
    env = {**job_environment(), "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN_PATH": str(token)}
    for name in (*INTERFACE_VARIABLES, "RAY_ADDRESS", "RAY_AUTH_TOKEN"):
        env.pop(name, None)
    return env


def ray_start(host: two_hosts.Host, temp_dir: Path, head: two_hosts.Host, token: Path, cpus: int) -> None:
    """Start ``host``'s Ray node (the head when ``host`` is ``head``); raises with Ray's output if it fails."""
    ray = str(Path(sys.executable).parent / "ray")
    role = (["--head", "--port", str(PORT), "--include-dashboard=false"] if host is head
            else ["--address", f"{head.address}:{PORT}"])
    command = host.command([ray, "start", *role, "--node-ip-address", host.address, "--num-cpus", str(cpus),
                            "--object-store-memory", OBJECT_STORE, "--temp-dir", str(temp_dir),
                            "--disable-usage-stats"])
    done = subprocess.run(command, capture_output=True, text=True, env=environment(token), timeout=120)
    assert done.returncode == 0, f"ray start on {host.namespace}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def test_ray_worker_joining_from_the_second_host(backend_name, tmp_path):
    if backend_name != "torch":
        pytest.skip("torch only: not run across two hosts on paddle/oneflow (paddle's local env had no Ray to try "
                    "it with; test_ray.py checks them under Ray on one host; jittor cannot run under Ray)")
    pytest.importorskip("ray.train", reason='Ray Train is not installed (pip install -e ".[ray]")')
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)
    # Short folders: Ray's unix sockets live under --temp-dir, and a socket path has at most 107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="fctray", dir="/tmp"))
    out = tmp_path / "out"
    out.mkdir()
    token = temp / "auth_token"
    token.write_text(secrets.token_hex(32))
    started = time.perf_counter()
    try:
        with two_hosts.two_hosts() as (node0, node1):
            ray_start(node0, temp / "a", node0, token, 2)
            ray_start(node1, temp / "b", node0, token, 2)
            up = time.perf_counter()
            driver = subprocess.run(node0.command([sys.executable, str(DRIVER), f"{node0.address}:{PORT}", str(out),
                                                   str(BATCH), backend_name]),
                                    capture_output=True, text=True, env=environment(token), timeout=240)
            trained = time.perf_counter()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    print(f"Ray nodes up in {up - started:.1f} s, job in {trained - up:.1f} s")
    assert driver.returncode == 0, f"{driver.stdout[-4000:]}\n{driver.stderr[-4000:]}"
    for per_node in (1, 2):
        check_job(out / str(per_node), per_node, node0, node1, tmp_path, backend_name)


def check_job(out: Path, per_node: int, node0: two_hosts.Host, node1: two_hosts.Host, tmp_path: Path,
              backend_name: str) -> None:
    """The job of ``per_node`` workers per node: placed, trained and connected as it should be."""
    world = 2 * per_node
    placed = [json.loads((out / f"ray_{rank}.json").read_text()) for rank in range(world)]
    ranks = [json.loads((out / f"rank_{rank}.json").read_text()) for rank in range(world)]
    # per_node workers on each node (rank 0 wherever Ray put it); the master is rank 0's link address
    ips = sorted(seen["node_ip"] for seen in placed)
    assert ips == sorted([node0.address, node1.address] * per_node), placed
    assert len({seen["node_id"] for seen in placed}) == 2, placed
    for address in (node0.address, node1.address):  # each node's workers: local ranks 0..per_node-1
        local = sorted(int(seen["variables"]["LOCAL_RANK"]) for seen in placed if seen["node_ip"] == address)
        assert local == list(range(per_node)), placed
    for rank, (where, seen) in enumerate(zip(placed, ranks)):
        host, other = (node0, node1) if where["node_ip"] == node0.address else (node1, node0)
        assert where["variables"]["MASTER_ADDR"] == placed[0]["node_ip"], where
        assert seen["rank"] == rank and seen["world_size"] == world
        assert seen["batches"] == EPOCHS * SAMPLES // (BATCH * world), seen["batches"]  # its share
        assert seen["interfaces"]["GLOO_SOCKET_IFNAME"] == host.interface, seen["interfaces"]
        connections = [tuple(pair) for pair in seen["connections"]]
        assert any(remote == other.address for _, remote in connections), (rank, connections)
        assert all(local == host.address for local, _ in connections), (rank, connections)
    reference = tmp_path / f"one_process_{per_node}"
    reference.mkdir()
    done = subprocess.run([sys.executable, str(JOB), str(reference), str(BATCH * world), backend_name],
                          capture_output=True, text=True, env=job_environment(), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = json.loads((reference / "rank_0.json").read_text())["weights"]
    for seen in ranks:
        for name, value in expected.items():
            np.testing.assert_allclose(seen["weights"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
