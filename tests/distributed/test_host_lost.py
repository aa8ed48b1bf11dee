"""A host lost mid-epoch (issue 39): two hosts (tests/distributed/two_hosts.py), one rank each, training
docs/multinode.md's script with a checkpoint every 4 batches into a folder both see and a 10 s
collective timeout. In the second epoch, with both ranks holding after the same batch, node1's end of the
link goes down (its packets vanish, nothing is reset: a machine lost). Node0's rank must stop within the
collective timeout (plus the few seconds its probe of the other host takes) with an error naming
node1's address and its rank; then a restart from the newest checkpoint on node0 alone (two ranks there)
ends with the weights of a run never interrupted. Torch: ranks started from the environment, as srun or
a user's own launcher starts them (torchrun's elastic restart: test_host_lost_torchrun.py); paddle and
oneflow: their launchers with docs/multinode.md's commands.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.distributed import two_hosts
from tests.distributed.launchers import job_environment

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "jobs" / "host_loss_job.py"
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 10  # collective_timeout
HOLD_AT = 22  # global batch: 16 an epoch on 2 ranks, so the 6th of epoch 2; the newest checkpoint is batch 20's


@pytest.fixture
def hosts(backend_name):
    if backend_name == "jittor":
        pytest.skip("jittor runs under mpirun: test_host_lost_mpirun.py")
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with two_hosts.two_hosts() as made:
        yield made


def environment(**variables: object) -> dict[str, str]:
    env = {**job_environment(), "PYTHONPATH": str(ROOT), **{name: str(value) for name, value in variables.items()}}
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        env.pop(name, None)
    return env


def start_rank(host: two_hosts.Host, rank: int, local: tuple[int, int], master: str, port: int, out: Path,
               *extra: str) -> subprocess.Popen:
    """A torch rank started from the environment (as srun or a user's own launcher starts it)."""
    env = environment(RANK=rank, LOCAL_RANK=local[0], WORLD_SIZE=2, LOCAL_WORLD_SIZE=local[1], MASTER_ADDR=master,
                      MASTER_PORT=port)
    out.mkdir(exist_ok=True)
    return subprocess.Popen(host.command([sys.executable, str(JOB), str(out), "torch", str(TIMEOUT), *extra]), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def start_node(backend: str, host: two_hosts.Host, node_rank: int, master: two_hosts.Host, port: int, out: Path,
               nnodes: int, *extra: str) -> subprocess.Popen:
    """One node of the job: a torch rank (one per node), or paddle's or oneflow's launcher with
    docs/multinode.md's command (``nnodes`` 1: two ranks on this node alone)."""
    if backend == "torch":
        local = (0, 1) if nnodes == 2 else (node_rank, 2)
        return start_rank(host, node_rank, local, master.address, port, out, *extra)
    per_node = 2 // nnodes
    job = [str(JOB), str(out), backend, str(TIMEOUT), *extra]
    if backend == "paddle":
        own = ["--host", master.address] if node_rank == 0 else []
        launcher = ["paddle.distributed.launch", "--nnodes", str(nnodes), "--master", f"{master.address}:{port}",
                    *own, "--log_dir", str(out / f"paddle_log_{host.namespace}_{port}")]
    else:
        launcher = ["oneflow.distributed.launch", "--nnodes", str(nnodes), "--node_rank", str(node_rank),
                    "--master_addr", master.address, "--master_port", str(port)]
    out.mkdir(exist_ok=True)
    return subprocess.Popen(host.command([sys.executable, "-m", *launcher, "--nproc_per_node", str(per_node), *job]),
                            env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=out, start_new_session=True)


def logs(out: Path) -> str:
    """What paddle's launcher wrote to files instead of the terminal."""
    return "".join(path.read_text(errors="replace") for path in sorted(out.glob("paddle_log_*/*")))


def ended(process: subprocess.Popen, host: two_hosts.Host, bound: float) -> tuple[int, str]:
    """Exit status and output (killed, with everything on its host, after ``bound`` seconds: a hang)."""
    try:
        output, _ = process.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        host.kill_everything()
        return -9, f"(still running after {bound} s: killed) {process.communicate()[0]}"
    return process.returncode, output


def wait_for(paths: list[Path], processes: list[subprocess.Popen], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not all(path.exists() for path in paths):
        assert time.monotonic() < deadline, f"never saw {paths}"
        for process in processes:
            if process.poll() is not None:
                raise AssertionError(f"a rank ended early ({process.returncode}): {process.communicate()[0][-3000:]}")
        time.sleep(0.05)


def on_node0(backend: str, node0: two_hosts.Host, out: Path, port: int) -> list[subprocess.Popen]:
    """The job on node0 alone, two ranks there."""
    if backend == "torch":
        return [start_node(backend, node0, rank, node0, port, out, 1) for rank in (0, 1)]
    return [start_node(backend, node0, 0, node0, port, out, 1)]


def weights(out: Path, rank: int) -> dict:
    return json.loads((out / f"rank_{rank}.json").read_text())["weights"]


def test_a_host_lost_mid_epoch_stops_the_survivors_naming_it_and_a_restart_ends_with_the_same_weights(
        backend_name, hosts, tmp_path):
    node0, node1 = hosts
    out = tmp_path / "lost"
    nodes = [start_node(backend_name, node, rank, node0, 29621, out, 2, str(HOLD_AT))
             for rank, node in enumerate((node0, node1))]
    wait_for([out / "held_0", out / "held_1"], nodes)
    node1.set_link(False)  # node1 lost: from now on nothing it sends arrives, nor anything sent to it
    (out / "release").write_text("")
    released = time.monotonic()
    code, output = ended(nodes[0], node0, TIMEOUT + 60)
    seconds = time.monotonic() - released
    node1.kill_everything()  # the lost host's rank (its own watchdog ends it too)
    nodes[1].communicate()
    output += logs(out)
    assert code != 0, output[-3000:]
    assert seconds < TIMEOUT + 15, f"node0 stopped {seconds:.1f} s after the cut (collective_timeout={TIMEOUT}): {output[-3000:]}"
    assert "collective timeout" in output, output[-3000:]
    # "Lost: host 10.x.y.2 (vm) (rank 1): no answer within 3 s ..." (the hostname is the same on both here)
    assert re.search(rf"Lost: host {re.escape(node1.address)} (\(\S+\) )?\(rank 1\)", output), output[-3000:]
    print(f"node0 stopped {seconds:.1f} s after the cut:\n" + output[output.index("[rank 0] collective"):][:1500])

    # A restart on node0 alone, from the newest checkpoint, and a run never interrupted (side by side).
    straight = tmp_path / "straight"
    restarted, uninterrupted = on_node0(backend_name, node0, out, 29622), on_node0(backend_name, node0, straight, 29623)
    ends = [ended(process, node0, 120) for process in restarted + uninterrupted]
    for code, output in ends:
        assert code == 0, output[-3000:] + logs(out)[-3000:] + logs(straight)[-3000:]
    assert f"resumed at batch {HOLD_AT - 2}" in ends[0][1], ends[0][1][-3000:]
    for rank in (0, 1):
        for name, value in weights(straight, rank).items():
            np.testing.assert_array_equal(weights(out, rank)[name], value, err_msg=name)
