"""torchrun across two hosts (network namespaces on this machine: tests/distributed/two_hosts.py),
with docs/multinode.md's commands, one and two ranks per node. The hostname resolves to 127.0.0.1
on both, so a rank that advertised it could not be reached (gloo's "connectFullMesh failed ...
remote=[127.0.0.1]"): the ranks take the interface of their route toward the master. Each rank
trains its share of the batches, the weights end equal on every rank and equal to one process's
on the global batch. Torch only: torchrun is torch's launcher."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.distributed import two_hosts
from tests.distributed.launchers import job_environment

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "jobs" / "two_hosts_job.py"
ROOT = Path(__file__).resolve().parents[2]
BATCH, SAMPLES, EPOCHS = 16, 512, 2


def torchrun(host: two_hosts.Host, master: two_hosts.Host, node_rank: int, per_node: int, out: Path,
             port: int) -> subprocess.Popen:
    command = host.command([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank",
                            str(node_rank), "--master_addr", master.address, "--master_port", str(port),
                            "--nproc_per_node", str(per_node), str(JOB), str(out), str(BATCH)])
    env = {**job_environment(), "PYTHONPATH": str(ROOT)}
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        env.pop(name, None)  # the user sets none: the ranks must find the interface themselves
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def finish(process: subprocess.Popen, host: two_hosts.Host, timeout: float) -> tuple[int, str]:
    """The node's exit status and output; one still running after ``timeout`` is killed with every
    process on its host (torchrun's ranks run in sessions of their own and hold its pipes)."""
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        host.kill_everything()
        _, stderr = process.communicate(timeout=30)
        return -9, f"(killed after {timeout} s) {stderr}"
    return process.returncode, stderr


@pytest.mark.parametrize("per_node", [1, 2])
def test_torchrun_across_two_hosts_as_the_docs_write_it(backend_name, tmp_path, per_node):
    if backend_name != "torch":
        pytest.skip("torchrun is torch's launcher")
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)
    world = 2 * per_node
    with two_hosts.two_hosts() as (node0, node1):
        nodes = [torchrun(node, node0, rank, per_node, tmp_path, 29400 + per_node) for rank, node in
                 enumerate((node0, node1))]
        ends = [finish(process, node, 120) for process, node in zip(nodes, (node0, node1))]
    for rank, (code, stderr) in enumerate(ends):
        assert code == 0, f"node {rank}: {stderr[-3000:]}"
    ranks = [json.loads((tmp_path / f"rank_{rank}.json").read_text()) for rank in range(world)]
    interfaces = {node0.interface, node1.interface}
    for seen in ranks:
        assert seen["world_size"] == world
        assert seen["batches"] == EPOCHS * SAMPLES // (BATCH * world), seen["batches"]  # its share
        assert seen["gloo_interface"] in interfaces, seen["gloo_interface"]  # the link, not the hostname's loopback
    reference = tmp_path / "one_process"
    reference.mkdir()
    done = subprocess.run([sys.executable, str(JOB), str(reference), str(BATCH * world)], capture_output=True,
                          text=True, env={**job_environment(), "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = json.loads((reference / "rank_0.json").read_text())["weights"]
    for seen in ranks:
        for name, value in expected.items():
            np.testing.assert_allclose(seen["weights"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
