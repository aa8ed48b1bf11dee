"""Two more ways across two hosts (network namespaces on this machine: tests/distributed/two_hosts.py),
one and two ranks per node, as docs/multinode.md writes them:

- **mpirun with a hostfile** (jittor): mpirun runs on node0 and starts node1's daemon through an rsh
  agent that enters node1's namespace (tests/distributed/agents/netns_rsh_agent.sh), as ssh enters a
  real host. Each rank sends on the interface toward mpirun's host (``OMPI_MCA_btl_tcp_if_include``,
  set by ``import fastcore_train``), and Open MPI's TCP transport is not switched off (``btl=^tcp`` is
  for one machine only).
- **SLURM with a two-node nodelist** (torch, paddle): each task is started in its node's namespace with
  the variables srun sets for it; the nodelist names the two hosts by names that resolve to their
  addresses on both (``ip netns exec`` reads ``/etc/netns/NS/hosts`` as ``/etc/hosts``), so the master
  is node0 by its name, as on a cluster.

Each rank trains its share of the batches; the weights end equal on every rank and equal to one
process trained on the global batch; each rank used its own host's link interface; every socket any
process of a host listened on (mpirun's daemons included) is on loopback or that host's link address,
beyond what ``OPEN_ACROSS_HOSTS`` (tests/distributed/open_sockets.py) names.
"""
from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.distributed import two_hosts
from tests.distributed.launchers import job_environment
from tests.distributed.open_sockets import check_two_hosts
from tests.distributed.test_data_parallel import JOB, SAMPLES, assert_close, rank_outputs, single_process_weights
from tests.distributed.test_two_hosts import finish

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).parent / "agents" / "netns_rsh_agent.sh"
BATCH = 8  # per rank


def _skip_without_two_hosts() -> None:
    reason = two_hosts.unavailable()
    if reason is not None:
        pytest.skip(reason)


def check_ranks(folder: Path, world: int, per_node: int, global_batch: int, harness, interface_of) -> list[dict]:
    """Each rank its share, every rank the same weights, those of one process on the global batch,
    and rank r on node r // per_node used that node's interface (``interface_of(rank) -> (variable, name)``)."""
    ranks = rank_outputs(folder, world)
    for rank, seen in enumerate(ranks):
        assert seen["world_size"] == world
        assert seen["global_forward_batches"] == SAMPLES // global_batch, seen["global_forward_batches"]
        variable, interface = interface_of(rank)
        assert seen["interfaces"][variable] == interface, (rank, seen["interfaces"])
    everything = [index for seen in ranks for index in seen["seen"]]
    assert sorted(everything) == list(range(SAMPLES)) and max(Counter(everything).values()) == 1, "the ranks split the data"
    for seen in ranks[1:]:
        for name, value in ranks[0]["weights"].items():
            assert (seen["weights"][name] == value).all(), f"{name} differs between ranks"
    assert_close(ranks[0]["weights"], single_process_weights(harness, global_batch))
    return ranks


# ---------------------------------------------------------------- mpirun with a hostfile (jittor)
def mpirun_environment() -> dict[str, str]:
    env = {**job_environment(), "PYTHONPATH": str(ROOT)}
    # The hostfile's slots place the ranks; the one-machine suite's oversubscribe settings would map
    # every rank onto node0 (by core, past its slots).
    for name in ("OMPI_MCA_rmaps_base_oversubscribe", "PRTE_MCA_rmaps_default_mapping_policy", "OMPI_MCA_btl",
                 "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_btl_tcp_if_exclude"):
        env.pop(name, None)
    # Both namespaces share this machine's hostname (one UTS namespace); Open MPI's hierarchical
    # collectives (coll/han) group ranks by host name and then hang in MPI_Allgather. Real hosts have
    # names of their own (checked with a C MPI_Allgather: an agent giving node1 its own name, `unshare --uts`,
    # needs no such setting; jittor keys its compile cache by host name and would compile ~3 min for it).
    env["OMPI_MCA_coll"] = "^han"
    return env


@pytest.mark.parametrize("per_node", [1, 2])
def test_mpirun_with_a_hostfile_across_two_hosts(backend_name, harness, tmp_path, per_node):
    if backend_name != "jittor":
        pytest.skip("mpirun with a hostfile is how jittor's ranks span hosts (docs/multinode.md)")
    _skip_without_two_hosts()
    if shutil.which("mpirun") is None:
        pytest.skip("no mpirun on PATH")
    world = 2 * per_node
    config = {"backend": "jittor", "out": str(tmp_path), "device": None, "world_size": world,
              "batch_size": BATCH, "shuffle": False}
    with two_hosts.two_hosts() as (node0, node1), two_hosts.watching((node0, node1)) as watches:
        hostfile = tmp_path / "hosts"
        hostfile.write_text(f"{node0.address} slots={per_node}\n{node1.address} slots={per_node}\n")
        # docs/multinode.md's command, plus the agent that reaches the namespace and `--bind-to none`
        # (both "hosts" share this machine's 2 cores: bound by core, their ranks would share core 0).
        command = node0.command(["mpirun", "-np", str(world), "--hostfile", str(hostfile), "--mca", "plm_rsh_agent",
                                 str(AGENT), "-x", "PATH", "-x", "OMP_NUM_THREADS=1", "--bind-to", "none",
                                 sys.executable, str(JOB), json.dumps(config)])
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=mpirun_environment(), cwd=tmp_path, start_new_session=True)
        code, stderr = finish(process, node0, 150)
    assert code == 0, stderr[-4000:]
    nodes = (node0, node1)
    ranks = check_ranks(tmp_path, world, per_node, BATCH * world, harness,
                        lambda rank: ("OMPI_MCA_btl_tcp_if_include", nodes[rank // per_node].interface))
    assert all(seen["interfaces"]["OMPI_MCA_btl"] is None for seen in ranks), "TCP was switched off across hosts"
    check_two_hosts("jittor", "mpirun", [watch.seen for watch in watches], [node0.address, node1.address], per_node)


# ---------------------------------------------------------------- SLURM with a two-node nodelist
@pytest.mark.parametrize("per_node", [1, 2])
def test_slurm_tasks_on_a_two_node_nodelist(backend_name, harness, tmp_path, per_node):
    if backend_name == "jittor":
        pytest.skip("jittor takes no rank from SLURM's variables (tests/distributed/test_slurm_job.py): mpirun")
    if backend_name == "oneflow":
        pytest.skip("OneFlow 0.9 cannot run two nodes on one machine (docs/multinode.md)")
    _skip_without_two_hosts()
    world = 2 * per_node
    config = {"backend": backend_name, "out": str(tmp_path), "device": None, "world_size": world, "batch_size": BATCH}
    base = {key: value for key, value in job_environment().items()
            if not key.startswith(("SLURM_", "PADDLE_", "OMPI_", "PMI_", "FASTCORE_TRAIN_", "GLOO_", "NCCL_", "TP_"))}
    base.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    job_id = random.randrange(100000, 10_000_000)
    with two_hosts.two_hosts() as nodes, two_hosts.watching(nodes) as watches:
        prefix = nodes[0].namespace[:-1]  # the run's own names: <prefix>n0, <prefix>n1
        names = [f"{prefix}n{index}" for index in range(2)]
        with two_hosts.host_names(nodes, names):
            tasks = [(node.command([sys.executable, str(JOB), json.dumps(config)]), node,
                      two_hosts.srun_variables(index, local, per_node, f"{prefix}n[0-1]", names, job_id))
                     for index, node in enumerate(nodes) for local in range(per_node)]
            started = [(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                         env={**base, **variables}, start_new_session=True), node)
                       for argv, node, variables in tasks]
            ends = [finish(process, node, 150) for process, node in started]
    for rank, (code, stderr) in enumerate(ends):
        assert code == 0, f"task {rank}: {stderr[-3000:]}"
    check_ranks(tmp_path, world, per_node, BATCH * world, harness,
                lambda rank: ("GLOO_SOCKET_IFNAME", nodes[rank // per_node].interface))
    check_two_hosts(backend_name, "slurm", [watch.seen for watch in watches], [node.address for node in nodes], per_node)
