"""A stranger on the cluster's network neither joins a job across two hosts nor stops it (issue 39).

Three hosts on one network (tests/distributed/two_hosts.py, ``two_hosts_and_a_stranger``: network namespaces
joined by a bridge): a 2-rank job, one rank per node, started on node0 and node1 by the framework's launcher
as docs/multinode.md writes it (torchrun, paddle's launcher with ``--master``, oneflow's launcher; mpirun with
a hostfile for jittor), and the stranger on the third host (tests/distributed/stranger.py, as a process of
its own there). The stranger visits every port that the job's processes on node0 and node1 listen on beyond
loopback (what another machine can reach), at the node's address: random bytes, then the backend's
well-formed requests, while the ranks meet and while they train (tests/distributed/test_stranger.py's phases
and pass conditions: exit 0 on every node, a world of 2, every batch, one process's weights).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.distributed import two_hosts
from tests.distributed.launchers import job_environment
from tests.distributed.listening import listening_sockets
from tests.distributed.stranger import StrangerProcess
from tests.distributed.test_stranger import N_EPOCHS, check_the_ranks, visit_address, visit_the_job, xfail_if_known
from tests.distributed.test_two_hosts import finish, node_logs, start_node
from tests.distributed.test_two_hosts_mpirun_slurm import AGENT, mpirun_environment

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "jobs" / "train_job.py"
MASTER_PORT = 29517


@dataclass
class TwoHostJob:
    """A job on node0 and node1: what the test started there (a launcher per node, or mpirun on node0)."""

    started: list[tuple[subprocess.Popen, two_hosts.Host]]
    nodes: tuple[two_hosts.Host, two_hosts.Host]
    out: Path

    def ports(self) -> dict[tuple[str, int], str]:
        """Every socket the nodes' processes listen on beyond loopback, at the node's address."""
        return {(visit_address(listening, node.address), listening.port): f"{node.namespace[-1]}: {listening}"
                for node in self.nodes for listening in listening_sockets(node.pids()) if not listening.loopback}

    def alive(self) -> bool:
        return all(process.poll() is None for process, _ in self.started)

    def end(self) -> tuple[bool, str]:
        (self.out / "release").write_text("")
        ends = [finish(process, host, 90) for process, host in self.started]
        output = "\n".join(f"--- {host.namespace} ({code}):\n{text[-3000:]}" for (code, text), (_, host)
                           in zip(ends, self.started))
        logs = "".join(node_logs(self.out, rank)[-3000:] for rank in range(2) if (self.out / f"node{rank}").exists())
        return all(code == 0 for code, _ in ends), output + logs


def start_job(backend: str, nodes: tuple[two_hosts.Host, two_hosts.Host], out: Path) -> TwoHostJob:
    config = {"backend": backend, "out": str(out), "world_size": 2, "device": None, "hold": True,
              "n_epochs": N_EPOCHS, "slow": True}
    script = [str(JOB), json.dumps(config)]
    if backend != "jittor":
        return TwoHostJob([(start_node(backend, node, nodes[0], rank, 1, out, MASTER_PORT, script), node)
                           for rank, node in enumerate(nodes)], nodes, out)
    hostfile = out / "hosts"  # tests/distributed/test_two_hosts_mpirun_slurm.py's command
    hostfile.write_text(f"{nodes[0].address} slots=1\n{nodes[1].address} slots=1\n")
    command = nodes[0].command(["mpirun", "-np", "2", "--hostfile", str(hostfile), "--mca", "plm_rsh_agent", str(AGENT),
                                "-x", "PATH", "-x", "OMP_NUM_THREADS=1", "--bind-to", "none", sys.executable, *script])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=mpirun_environment(), cwd=out, start_new_session=True)
    return TwoHostJob([(process, nodes[0])], nodes, out)


def run_across_two_hosts(backend_name: str, harness, out: Path, phases: tuple[str, ...]) -> StrangerProcess:
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)
    started = time.monotonic()
    with two_hosts.two_hosts_and_a_stranger() as (node0, node1, outside):
        stranger = StrangerProcess(backend_name, outside.command([]), env=job_environment())
        job = start_job(backend_name, (node0, node1), out)
        try:
            visit_the_job(job, stranger, phases, out, started)
        except AssertionError as failure:
            xfail_if_known(backend_name, phases[0], failure, outside.address)
            raise
    print(f"{backend_name} across two hosts, {'/'.join(phases)}: {time.monotonic() - started:.1f} s; "
          f"{stranger.report()}")
    check_the_ranks(harness, out)
    return stranger


def test_a_stranger_on_the_network_during_rendezvous(backend_name, harness, tmp_path):
    """Where the framework does fail (test_stranger.py's ``STOPS_THE_JOB``), the test xfails on its own words."""
    run_across_two_hosts(backend_name, harness, tmp_path, ("rendezvous",))


def test_a_stranger_on_the_network_during_training(backend_name, harness, tmp_path):
    stranger = run_across_two_hosts(backend_name, harness, tmp_path, ("held", "running"))
    if backend_name in ("torch", "paddle"):  # the store took the stranger's key from the other host
        assert stranger.answered("held", "store"), f"no store answered the stranger:\n{stranger.report()}"
