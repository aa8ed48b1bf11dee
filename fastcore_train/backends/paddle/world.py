"""Which rank this process is, read from paddle's launcher variables, and those variables for our own
self-launched ranks.

``python -m paddle.distributed.launch`` (and ``paddle.distributed.spawn``) describe each rank with
``PADDLE_TRAINER_ID``, ``PADDLE_TRAINERS_NUM``, ``PADDLE_TRAINER_ENDPOINTS``,
``PADDLE_CURRENT_ENDPOINT``, ``PADDLE_MASTER`` (the TCP store of rank 0) and, on CPU,
``PADDLE_DISTRI_BACKEND=gloo``; ``paddle.distributed.init_parallel_env`` (called by
``fleet.init``) reads exactly these. A self-launch sets the same ones, so both paths look alike.
"""
from __future__ import annotations

import os
import re
from typing import Mapping, Optional

import paddle.distributed as dist

from fastcore_train.parallel.environment import PADDLE_LAUNCH, RankFacts, refuse_unlaunched_node
from fastcore_train.parallel.launch import free_port
from fastcore_train.parallel.loopback import loopback_address, on_one_machine
from fastcore_train.parallel.slurm import adopt_slurm, local_world_size, slurm_facts, task_hosts


def world_from_environment() -> Optional[RankFacts]:
    """The rank facts paddle's launcher (or our self-launch) put in the environment, else srun's
    (then paddle's launcher variables are written from SLURM's, for ``fleet.init`` to read)."""
    facts = PADDLE_LAUNCH.detect()
    if facts is None:
        facts = slurm_facts()
        if facts is not None:
            adopt_slurm(slurm_variables(facts, os.environ))
        else:
            refuse_unlaunched_node()  # a PaddleJob pod started without paddle's launcher
    return facts


def slurm_variables(facts: RankFacts, environ: Mapping[str, str]) -> dict[str, str]:
    """Paddle's launcher variables for one srun task: ranks and sizes from SLURM's, rank 0's TCP
    store at the job's master, one endpoint per task (its host; the port is only a name there)."""
    host, port = str(facts.master_address).rsplit(":", 1)
    local_size = local_world_size(environ, facts)
    hosts = task_hosts(environ, facts)
    endpoints = [f"{task_host}:{int(port) + 1 + rank % max(local_size, 1)}" for rank, task_host in enumerate(hosts)]
    return {"PADDLE_TRAINER_ID": str(facts.rank), "PADDLE_GLOBAL_RANK": str(facts.rank),
            "PADDLE_TRAINERS_NUM": str(facts.world_size), "PADDLE_GLOBAL_SIZE": str(facts.world_size),
            "PADDLE_LOCAL_RANK": str(facts.local_rank), "PADDLE_RANK_IN_NODE": str(facts.local_rank),
            "PADDLE_LOCAL_SIZE": str(local_size), "PADDLE_NNODES": str(len(set(hosts))),
            "PADDLE_MASTER": f"{host}:{port}", "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints),
            "PADDLE_CURRENT_ENDPOINT": endpoints[facts.rank]}


def world_from_process_group() -> Optional[RankFacts]:
    """The rank facts of a parallel environment the user initialised themselves."""
    if not dist.is_initialized():
        return None
    rank = dist.get_rank()
    return RankFacts(rank=rank, local_rank=int(os.environ.get("PADDLE_LOCAL_RANK", rank)),
                 world_size=dist.get_world_size())


def launch_environments(world_size: int, backend: str, gpu_ids: Optional[list[int]] = None
                        ) -> list[dict[str, str]]:
    """Paddle's launcher variables for each rank of a one-machine job we start ourselves.

    ``backend``: ``"gloo"`` (CPU ranks) or ``"nccl"``; ``gpu_ids``: each rank's GPU (nccl only),
    given to paddle as ``FLAGS_selected_gpus``.
    """
    host = "127.0.0.1"
    endpoints = [f"{host}:{free_port(host)}" for _ in range(world_size)]
    shared = {
        "PADDLE_TRAINERS_NUM": str(world_size), "PADDLE_GLOBAL_SIZE": str(world_size),
        "PADDLE_LOCAL_SIZE": str(world_size), "PADDLE_NNODES": "1",
        "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints), "PADDLE_MASTER": f"{host}:{free_port(host)}",
        "PADDLE_DISTRI_BACKEND": backend,
    }
    environments = []
    for rank in range(world_size):
        environment = {**shared, "PADDLE_TRAINER_ID": str(rank), "PADDLE_GLOBAL_RANK": str(rank),
                       "PADDLE_LOCAL_RANK": str(rank), "PADDLE_RANK_IN_NODE": str(rank),
                       "PADDLE_CURRENT_ENDPOINT": endpoints[rank]}
        if gpu_ids is not None:
            environment["FLAGS_selected_gpus"] = str(gpu_ids[rank])
        environments.append(environment)
    return environments


# What paddle 3.3's gloo transport raises when a rank could not reach a peer's socket while a group is set up.
_GLOO_CONNECT_FAILURE = "gloo/transport/tcp/pair.cc"
#: The peer address in gloo's "connect [ADDRESS]:PORT" message.
_GLOO_PEER = re.compile(r"connect \[([^\]]+)\]:\d+")


def explain_gloo_start_failure(error: BaseException, world_size: int,
                               environ: Optional[Mapping[str, str]] = None) -> BaseException:
    """The error to raise for ``error`` from ``fleet.init``: a clearer one for gloo's connection failures.

    A job across machines (``PADDLE_MASTER`` not loopback, ``PADDLE_LOCAL_SIZE`` short of the world) whose
    rank was sent to a loopback peer address: that peer advertised its
    loopback address (paddle's gloo takes it from ``GLOO_SOCKET_IFNAME``, else from the hostname), which
    no other machine reaches. Otherwise paddle's start-up race: paddle 3.3 connects every gloo group twice
    on the same store keys (its comm context, then its process group), so a rank ahead of a peer can read
    the peer's stale address ("Connection refused" on it, TIMEOUT on the others); it happens in a large
    share of starts with more than two CPU ranks. The same TIMEOUT comes when something that is not a rank
    connects to gloo's port while the ranks meet (docs/security.md). Any other error is returned as it is.
    """
    if _GLOO_CONNECT_FAILURE not in str(error):
        return error
    environ = os.environ if environ is None else environ
    peer = _GLOO_PEER.search(str(error))
    master = environ.get("PADDLE_MASTER", "").rpartition(":")[0] or None
    local = environ.get("PADDLE_LOCAL_SIZE", "")
    if (peer is not None and master is not None and loopback_address(peer.group(1)) is not None
            and not on_one_machine(master, world_size, int(local) if local.isdigit() else None)):
        chosen = environ.get("GLOO_SOCKET_IFNAME")
        return RuntimeError(
            f"paddle's {world_size} gloo (CPU) ranks span several machines (master {master}), but a rank was sent "
            f"to a peer at the loopback address {peer.group(1)}: {error}. That peer advertised an address no other "
            "machine reaches: paddle's gloo takes a rank's address from GLOO_SOCKET_IFNAME "
            f"({'set to ' + repr(chosen) if chosen else 'unset'} here), else from the hostname, which resolves to "
            "loopback there. Set GLOO_SOCKET_IFNAME on every node to the interface that reaches the other nodes "
            "(see docs/multinode.md, The interface).")
    return RuntimeError(
        f"paddle could not connect its {world_size} gloo (CPU) ranks: {error}. Paddle 3.3 sets up each gloo "
        "group twice on the same store keys, and a rank that gets ahead of another can read its stale address; "
        "with more than 2 CPU ranks on one machine this fails in a large share of starts. Start the job again, "
        "use 2 CPU ranks, or GPU ranks (nccl). See docs/backends/paddle.md (Data parallel). A TIMEOUT whose peer_str "
        "is none of the job's hosts is another process that connected to gloo's port while the ranks met, which gloo "
        "took for a rank: docs/security.md (A stranger connecting).")
