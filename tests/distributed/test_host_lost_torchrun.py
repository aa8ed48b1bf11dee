"""torchrun's elastic restart after a host lost (issue 39), with docs/multinode.md's command
(``--nnodes 1:2 --max-restarts 3 --rdzv-backend=c10d --rdzv-endpoint NODE0:PORT``,
``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``) on two hosts (tests/distributed/two_hosts.py), one rank per
node, a checkpoint every 4 batches into a folder both see. Node1's link goes down in the second epoch:
node0's rank stops (collective timeout, naming node1), node0's torchrun restarts its rank, torchrun's
rendezvous goes on with node0 alone once node1 missed its keep-alives, and the restarted rank resumes
from the newest checkpoint and trains to the end (on one rank now: the run goes on, not bit-identically).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.distributed import two_hosts
from tests.distributed.launchers import job_environment
from tests.distributed.test_host_lost import HOLD_AT, JOB, ROOT, TIMEOUT, wait_for

pytestmark = pytest.mark.distributed

#: torchrun's rendezvous settings that bound the restart (docs/multinode.md): the survivors wait
#: ``last_call_timeout`` for more nodes once ``--nnodes``' minimum is there.
RDZV_CONF = "last_call_timeout=5"


def torchrun(host: two_hosts.Host, master: two_hosts.Host, out: Path, port: int) -> subprocess.Popen:
    env = {**job_environment(), "PYTHONPATH": str(ROOT), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        env.pop(name, None)
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1:2", "--nproc_per_node", "1",
               "--max-restarts", "3", "--rdzv-backend=c10d", "--rdzv-endpoint", f"{master.address}:{port}",
               "--rdzv-id", "job42", "--local-addr", host.address,  # else rank 0 is announced as the hostname's address
               # node0 hosts the rendezvous store: torchrun does not see that the endpoint is its own address
               # where the hostname resolves to 127.0.0.1 (docs/multinode.md), so it says is_host=1.
               "--rdzv-conf", RDZV_CONF + (",is_host=1" if host == master else ""), str(JOB), str(out), "torch", str(TIMEOUT), str(HOLD_AT)]
    log = open(out / f"{host.namespace}.log", "w")
    return subprocess.Popen(host.command(command), env=env, stdout=log, stderr=subprocess.STDOUT,
                            text=True, cwd=out, start_new_session=True)


def test_torchrun_restarts_the_surviving_node_which_resumes_and_finishes(backend_name, tmp_path):
    if backend_name != "torch":
        pytest.skip("torchrun's elastic restart: torch only")
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with two_hosts.two_hosts() as (node0, node1):
        nodes = [torchrun(node, node0, tmp_path, 29631) for node in (node0, node1)]
        wait_for([tmp_path / "held_0", tmp_path / "held_1"], nodes, 120)
        node1.set_link(False)
        (tmp_path / "release").write_text("")
        cut = time.monotonic()
        try:
            nodes[0].wait(timeout=150)
        except subprocess.TimeoutExpired:
            node0.kill_everything()
            nodes[0].wait()
        seconds = time.monotonic() - cut
        node1.kill_everything()
        nodes[1].wait()
    output, lost_side = ((tmp_path / f"{node.namespace}.log").read_text() for node in (node0, node1))
    print(f"node0's torchrun ended {seconds:.1f} s after the cut, status {nodes[0].returncode}:\n{output[-6000:]}"
          f"\n--- node1:\n{lost_side[-3000:]}")
    assert nodes[0].returncode == 0, output[-6000:]
    assert re.search(rf"Lost: host {re.escape(node1.address)} (\(\S+\) )?\(rank 1\)", output), output[-6000:]
    assert "resumed at batch" in output, output[-6000:]
    finished = json.loads((tmp_path / "rank_0.json").read_text())
    assert finished["world_size"] == 1, finished
