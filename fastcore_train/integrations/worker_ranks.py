"""Rank facts of worker processes an engine started itself, and the launcher variables that make
a framework see them as one job. Written once for every engine and framework; nothing here imports
an engine or a framework.

An engine (Ray) hands over its workers in rank order and can say which machine each runs on; the
master (rank 0's host and a free port there) is asked of worker 0. From those, every worker's
rank, local rank, node rank and the size of its node follow, and a backend's
:class:`~fastcore_train.parallel.environment.LaunchEnvironment` names the variables to write.
"""
from __future__ import annotations

from typing import Sequence

from fastcore_train.parallel.environment import INTEGRATION_ENV, LaunchEnvironment, RankFacts

#: Why a launcher's ranks cannot be joined by processes it did not start (by launcher name).
CANNOT_JOIN = {
    "mpirun": ("MPI forms its world from the processes mpirun starts (MPI_Init reads what mpirun set up for "
               "each of them); processes started by another engine cannot be joined into one MPI world by "
               "setting variables"),
}


class WorkersCannotJoinError(RuntimeError):
    """The framework's ranks can only be started by its own launcher, not by an engine's workers."""


def worker_facts(nodes: Sequence[str], master_address: str, launcher: str) -> list[tuple[RankFacts, int]]:
    """Each worker's rank facts and the number of workers on its node, for workers in rank order
    on ``nodes`` (one node id per worker; nodes are numbered in order of first appearance)."""
    node_order: list[str] = []
    facts: list[tuple[RankFacts, int]] = []
    for rank, node in enumerate(nodes):
        if node not in node_order:
            node_order.append(node)
        local_rank = sum(1 for earlier in nodes[:rank] if earlier == node)
        facts.append((RankFacts(rank=rank, local_rank=local_rank, world_size=len(nodes),
                                node_rank=node_order.index(node), master_address=master_address,
                                launcher=launcher), nodes.count(node)))
    return facts


def check_joinable(environment: LaunchEnvironment, framework: str, engine: str, remedy: str) -> None:
    """Raise :class:`WorkersCannotJoinError` when ``environment``'s ranks must be started by its
    launcher (it names no rendezvous address other processes could meet at)."""
    if environment.master_address:
        return
    why = CANNOT_JOIN.get(environment.name, f"{environment.name} names no address its ranks meet at")
    raise WorkersCannotJoinError(
        f"{framework} cannot run as one job over {engine}'s workers: its data parallel runs only in processes "
        f"{environment.name} started, and {why}. {remedy}")


def worker_variables(environment: LaunchEnvironment, nodes: Sequence[str], hosts: Sequence[str],
                     master_address: str, engine: str) -> list[dict[str, str]]:
    """The launcher variables of every worker (rank order): ``nodes`` each worker's node id,
    ``hosts`` each worker's address, ``master_address`` rank 0's ``host:port``."""
    if len(hosts) != len(nodes):
        raise ValueError(f"{len(nodes)} workers but {len(hosts)} host addresses.")
    return [{**environment.variables_of(facts, local_size, hosts), INTEGRATION_ENV: engine}
            for facts, local_size in worker_facts(nodes, master_address, engine)]

