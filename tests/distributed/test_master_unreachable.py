"""A job's master across two hosts (tests/distributed/two_hosts.py), with ranks started as srun starts
them (one task per node, srun's variables): reached, a torch job listens only on each host's link; out
of reach, every rank stops within ``collective_timeout`` with an error naming the address, the interface
tried and what to check, never a silent wait (issue 39). Torch and paddle: their ranks meet in a store
our driver reaches first; jittor's meet through mpirun and oneflow's through its launcher.
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
from tests.distributed.listening import describe
from tests.distributed.open_sockets import check_two_hosts

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "jobs" / "two_hosts_job.py"
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 8  # collective_timeout where a rank must give up: how long it waits for the others to join
#: collective_timeout where the ranks must meet: on a loaded machine one rank may start much later than the other.
PATIENT = 120
#: Seconds a rank may take to start (interpreter, imports) on a loaded 2-core machine, on top of its wait.
START_UP = 90


@pytest.fixture
def hosts(backend_name):
    if backend_name not in ("torch", "paddle"):
        pytest.skip("jittor's ranks meet through mpirun, oneflow's through its launcher, before our code runs")
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with two_hosts.two_hosts() as made:
        names = [f"{made[0].namespace[:-1]}n{index}" for index in range(2)]
        with two_hosts.host_names(made, names):
            yield made, names


def start_rank(backend: str, hosts, node: int, master: str, port: int, out: Path,
               timeout: float = TIMEOUT) -> subprocess.Popen:
    """Task ``node`` of a 2-node srun step (one task per node), its master at ``master:port``."""
    (node0, node1), names = hosts
    host = (node0, node1)[node]
    env = {key: value for key, value in job_environment().items()
           if not key.startswith(("SLURM_", "PADDLE_", "GLOO_", "NCCL_", "TP_", "FASTCORE_TRAIN_"))}
    env.update(two_hosts.srun_variables(node, 0, 1, f"{names[0][:-1]}[0-1]", names, 4242),
               PYTHONPATH=str(ROOT), MASTER_ADDR=master, MASTER_PORT=str(port))
    out.mkdir(exist_ok=True)
    return subprocess.Popen(host.command([sys.executable, str(JOB), str(out), "16", backend, str(timeout)]),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=out)


def ended(process: subprocess.Popen, host: two_hosts.Host) -> tuple[int, str, float]:
    """Exit status, stderr and seconds until the rank ended (killed, with its host, past any sane bound)."""
    start = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=2 * START_UP + PATIENT)
    except subprocess.TimeoutExpired:
        host.kill_everything()
        _, stderr = process.communicate()
        return -9, f"(still waiting: killed) {stderr}", time.monotonic() - start
    return process.returncode, stderr, time.monotonic() - start


def test_ranks_on_two_hosts_meet_and_listen_only_on_the_masters_link(backend_name, hosts, tmp_path):
    if backend_name != "torch":
        pytest.skip("paddle's store listens on every interface (docs/security.md)")
    (node0, node1), _ = hosts
    with two_hosts.watching((node0, node1)) as watches:
        ranks = [start_rank(backend_name, hosts, node, node0.address, 29611, tmp_path, PATIENT) for node in (0, 1)]
        ends = [ended(process, node) for process, node in zip(ranks, (node0, node1))]
    for rank, (code, stderr, _) in enumerate(ends):
        assert code == 0, f"rank {rank}: {stderr[-3000:]}"
    assert [json.loads((tmp_path / f"rank_{rank}.json").read_text())["world_size"] for rank in (0, 1)] == [2, 2]
    seen = watches[0].seen
    store = [listening for listening in seen if listening.port == 29611]
    assert store, f"rank 0's store was never seen listening:\n{describe(seen)}"
    assert all(listening.address in (node0.address, f"::ffff:{node0.address}") for listening in store), describe(store)
    check_two_hosts(backend_name, "slurm", [watch.seen for watch in watches], [node0.address, node1.address], 1)


def test_a_master_out_of_reach_is_a_clear_error_on_every_host_within_the_timeout(backend_name, hosts, tmp_path):
    """Three jobs at once, each missing its other half: a rank whose master was never started (refused),
    a rank whose master address answers nowhere, and a rank 0 whose other rank never came."""
    (node0, node1), _ = hosts
    absent = node0.address.rsplit(".", 1)[0] + ".77"
    cases = {"refused": (1, node0.address, 29612), "absent": (1, absent, 29613), "alone": (0, node0.address, 29614)}
    started = {name: start_rank(backend_name, hosts, node, master, port, tmp_path / name)
               for name, (node, master, port) in cases.items()}
    results = {name: ended(process, (node0, node1)[cases[name][0]]) for name, process in started.items()}
    for name, (code, stderr, seconds) in results.items():
        assert code != 0, f"{name}: {stderr[-3000:]}"
        # the rank's own clock says it gave up after collective_timeout (below); this bounds start-up too
        assert seconds < TIMEOUT + START_UP, f"{name}: stopped after {seconds:.0f} s, collective_timeout={TIMEOUT}"
    stderr = results["refused"][1]
    assert "MasterUnreachableError" in stderr and f"{node0.address}:29612 in {TIMEOUT} s" in stderr, stderr[-3000:]
    assert "connection refused" in stderr and f"interface {node1.interface}" in stderr, stderr[-3000:]
    assert "still waiting for the job's master" in stderr, stderr[-3000:]  # never a silent wait
    stderr = results["absent"][1]
    assert "MasterUnreachableError" in stderr and f"{absent}:29613 in {TIMEOUT} s" in stderr, stderr[-3000:]
    assert f"interface {node1.interface}" in stderr, stderr[-3000:]
    stderr = results["alone"][1]
    assert f"rank 0 waited {TIMEOUT} s" in stderr and f"{node0.address}:29614" in stderr and "WORLD_SIZE" in stderr, stderr[-3000:]
    assert f"interface {node0.interface}" in stderr, stderr[-3000:]
