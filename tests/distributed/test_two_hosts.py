"""Each backend's launcher across two hosts (network namespaces on this machine:
tests/distributed/two_hosts.py), with docs/multinode.md's commands, one and two ranks per node:
torchrun, paddle's launcher, oneflow's launcher. The hostname resolves to 127.0.0.1 on both, so a
rank that advertised it could not be reached (gloo's "connectFullMesh failed ...
remote=[127.0.0.1]"): the ranks take the interface of their route toward the master. Each rank
trains its share of the batches, the weights end equal on every rank and equal to one process's
on the global batch, the ranks' connections cross the link, none loopback, and every socket any process
of a host listens on is on loopback or that host's link address, beyond what ``OPEN_ACROSS_HOSTS``
(tests/distributed/open_sockets.py) names for the backend's launcher."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from tests.distributed import two_hosts
from tests.distributed.launchers import job_environment
from tests.distributed.open_sockets import check_two_hosts

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "jobs" / "two_hosts_job.py"
ROOT = Path(__file__).resolve().parents[2]
BATCH, SAMPLES, EPOCHS = 16, 512, 2
#: Interface variables the user sets none of: the ranks must find the interface themselves.
INTERFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def launcher_command(backend: str, node_rank: int, master: two_hosts.Host, per_node: int, port: int,
                     out: Path, job: Optional[list[str]] = None) -> list[str]:
    """docs/multinode.md's command for ``backend``'s launcher on node ``node_rank``, running ``job`` (a script and
    its arguments; two_hosts_job.py by default)."""
    job = job or [str(JOB), str(out), str(BATCH), backend]
    if backend == "torch":
        return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node_rank),
                "--master_addr", master.address, "--master_port", str(port), "--nproc_per_node", str(per_node), *job]
    if backend == "paddle":
        # node0 names its own address (--host): paddle's launcher takes a node's address from its hostname
        # (here 127.0.0.1), so without it node0 would not see that it is the master, and no node would serve.
        host = ["--host", master.address] if node_rank == 0 else []
        return [sys.executable, "-m", "paddle.distributed.launch", "--nnodes", "2", "--master",
                f"{master.address}:{port}", *host, "--nproc_per_node", str(per_node), *job]
    return [sys.executable, "-m", "oneflow.distributed.launch", "--nnodes", "2", "--node_rank", str(node_rank),
            "--master_addr", master.address, "--master_port", str(port), "--nproc_per_node", str(per_node), *job]


def start_node(backend: str, host: two_hosts.Host, master: two_hosts.Host, node_rank: int, per_node: int,
               out: Path, port: int, job: Optional[list[str]] = None) -> subprocess.Popen:
    env = {**job_environment(), "PYTHONPATH": str(ROOT)}
    for name in INTERFACE_VARIABLES:
        env.pop(name, None)
    folder = out / f"node{node_rank}"  # the node's working directory (paddle writes ./log there)
    folder.mkdir()
    command = host.command(launcher_command(backend, node_rank, master, per_node, port, out, job))
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=folder, start_new_session=True)


def finish(process: subprocess.Popen, host: two_hosts.Host, timeout: float) -> tuple[int, str]:
    """The node's exit status and output; one still running after ``timeout`` is killed with every
    process on its host (a launcher's ranks may run in sessions of their own and hold its pipes)."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        host.kill_everything()
        output, _ = process.communicate(timeout=30)
        return -9, f"(killed after {timeout} s) {output}"
    return process.returncode, output


def node_logs(out: Path, node_rank: int) -> str:
    """What paddle's launcher wrote to files instead of the terminal (the other ranks' output)."""
    return "".join(path.read_text(errors="replace") for path in sorted((out / f"node{node_rank}").glob("log/*")))


@pytest.mark.parametrize("per_node", [1, 2])
def test_launcher_across_two_hosts_as_the_docs_write_it(backend_name, tmp_path, per_node):
    if backend_name == "jittor":
        pytest.skip("jittor runs under mpirun with a hostfile: not part of this test")
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)
    world = 2 * per_node
    with two_hosts.two_hosts() as (node0, node1), two_hosts.watching((node0, node1)) as watches:
        nodes = [start_node(backend_name, node, node0, rank, per_node, tmp_path, 29400 + per_node)
                 for rank, node in enumerate((node0, node1))]
        ends = [finish(process, node, 120) for process, node in zip(nodes, (node0, node1))]
    for rank, (code, output) in enumerate(ends):
        assert code == 0, f"node {rank}: {output[-3000:]}\n{node_logs(tmp_path, rank)[-3000:]}"
    ranks = [json.loads((tmp_path / f"rank_{rank}.json").read_text()) for rank in range(world)]
    for seen in ranks:
        host, other = (node0, node1) if seen["rank"] < per_node else (node1, node0)
        assert seen["world_size"] == world
        assert seen["batches"] == EPOCHS * SAMPLES // (BATCH * world), seen["batches"]  # its share
        # the link, not the hostname's loopback (oneflow's own transports read no variable; NCCL's is set for it)
        assert seen["interfaces"]["NCCL_SOCKET_IFNAME"] == host.interface, seen["interfaces"]
        if backend_name != "oneflow":
            assert seen["interfaces"]["GLOO_SOCKET_IFNAME"] == host.interface, seen["interfaces"]
        connections = [tuple(pair) for pair in seen["connections"]]
        assert any(remote == other.address for _, remote in connections), (seen["rank"], connections)
        assert all(local == host.address for local, _ in connections), (seen["rank"], connections)
    reference = tmp_path / "one_process"
    reference.mkdir()
    done = subprocess.run([sys.executable, str(JOB), str(reference), str(BATCH * world), backend_name],
                          capture_output=True, text=True, env={**job_environment(), "PYTHONPATH": str(ROOT)},
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = json.loads((reference / "rank_0.json").read_text())["weights"]
    for seen in ranks:
        for name, value in expected.items():
            np.testing.assert_allclose(seen["weights"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    # every socket each host's processes listened on, from the launchers' start to their end
    check_two_hosts(backend_name, "launcher", [watch.seen for watch in watches], [node0.address, node1.address],
                    per_node)
