"""A job's master across two hosts (tests/distributed/two_hosts.py), with ranks started from the
environment as srun or a user's own launcher starts them: reached, the job listens only on the master's
link; out of reach, every rank stops within ``collective_timeout`` with an error naming the address,
the interface tried and what to check, never a silent wait (issue 39). Torch: the store is the driver's.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.distributed import two_hosts
from tests.distributed.launchers import job_environment
from tests.distributed.listening import SocketWatch, describe

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "jobs" / "two_hosts_job.py"
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 8  # collective_timeout: how long a rank waits for the others to join


@pytest.fixture
def hosts(backend_name):
    if backend_name != "torch":
        pytest.skip("the job's store is torch's driver's (paddle's and oneflow's launchers meet before our code runs)")
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with two_hosts.two_hosts() as made:
        yield made


def start_rank(host: two_hosts.Host, rank: int, master: str, port: int, out: Path) -> subprocess.Popen:
    env = {**job_environment(), "PYTHONPATH": str(ROOT), "RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": "2",
           "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": master, "MASTER_PORT": str(port)}
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        env.pop(name, None)
    out.mkdir(exist_ok=True)
    return subprocess.Popen(host.command([sys.executable, str(JOB), str(out), "16", "torch", str(TIMEOUT)]), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ended(process: subprocess.Popen, host: two_hosts.Host) -> tuple[int, str, float]:
    """Exit status, stderr and seconds until the rank ended (killed, with its host, after three timeouts)."""
    start = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=3 * TIMEOUT + 30)
    except subprocess.TimeoutExpired:
        host.kill_everything()
        return -9, "(still waiting: killed)", time.monotonic() - start
    return process.returncode, stderr, time.monotonic() - start


def test_ranks_on_two_hosts_meet_and_listen_only_on_the_masters_link(hosts, tmp_path):
    node0, node1 = hosts
    ranks = [start_rank(node, rank, node0.address, 29611, tmp_path) for rank, node in enumerate((node0, node1))]
    watch = SocketWatch(ranks[0].pid).start()
    ends = [ended(process, node) for process, node in zip(ranks, (node0, node1))]
    seen = watch.stop()
    for rank, (code, stderr, _) in enumerate(ends):
        assert code == 0, f"rank {rank}: {stderr[-3000:]}"
    assert [json.loads((tmp_path / f"rank_{rank}.json").read_text())["world_size"] for rank in (0, 1)] == [2, 2]
    store = [listening for listening in seen if listening.port == 29611]
    assert store, f"rank 0's store was never seen listening:\n{describe(seen)}"
    elsewhere = [listening for listening in seen if listening.address not in (node0.address, f"::ffff:{node0.address}")
                 and not listening.loopback]
    assert not elsewhere, f"listening beyond the link toward the master ({node0.address}):\n{describe(elsewhere)}"


def test_a_master_out_of_reach_is_a_clear_error_on_every_host_within_the_timeout(hosts, tmp_path):
    """Three jobs at once, each missing its other half: a rank whose master was never started (refused),
    a rank whose master address answers nowhere, and a rank 0 whose other rank never came."""
    node0, node1 = hosts
    absent = node0.address.rsplit(".", 1)[0] + ".77"
    cases = {"refused": (node1, 1, node0.address, 29612), "absent": (node1, 1, absent, 29613),
             "alone": (node0, 0, node0.address, 29614)}
    started = {name: start_rank(host, rank, master, port, tmp_path / name) for name, (host, rank, master, port)
               in cases.items()}
    results = {name: ended(process, cases[name][0]) for name, process in started.items()}
    for name, (code, stderr, seconds) in results.items():
        assert code != 0, f"{name}: {stderr[-3000:]}"
        assert seconds < TIMEOUT + 20, f"{name}: stopped after {seconds:.0f} s, collective_timeout={TIMEOUT}"
    stderr = results["refused"][1]
    assert "MasterUnreachableError" in stderr and f"{node0.address}:29612" in stderr, stderr[-3000:]
    assert "connection refused" in stderr and f"interface {node1.interface}" in stderr, stderr[-3000:]
    assert "still waiting for the job's master" in stderr, stderr[-3000:]  # never a silent wait
    stderr = results["absent"][1]
    assert "MasterUnreachableError" in stderr and f"{absent}:29613" in stderr, stderr[-3000:]
    assert f"interface {node1.interface}" in stderr, stderr[-3000:]
    stderr = results["alone"][1]
    assert "rank 0 waited" in stderr and f"{node0.address}:29614" in stderr and "WORLD_SIZE" in stderr, stderr[-3000:]
    assert f"interface {node0.interface}" in stderr, stderr[-3000:]
