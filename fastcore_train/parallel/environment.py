"""Rank facts: which rank this process is, read once from the way it was launched.

Every launcher describes a rank in environment variables of its own (torchrun ``RANK``,
paddle's launcher ``PADDLE_TRAINER_ID``, Open MPI ``OMPI_COMM_WORLD_RANK``...). One
:class:`LaunchEnvironment` per launcher names those variables; reading them (detection, rank,
local rank, world size, node, master address) is written once here. Self-launched ranks carry
their launcher's variables plus :data:`LAUNCHED_RANK_ENV`; a plain process is
:data:`SINGLE_PROCESS`. Nothing here imports a framework, so logging can ask before any
framework is loaded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

#: Set in the environment of every rank fastcore_train starts itself; its value is the rank (or "mpi").
LAUNCHED_RANK_ENV = "FASTCORE_TRAIN_LAUNCHED_RANK"
#: Set by Kubernetes in every container. A rank there without a local rank is a pod of its own (Kubeflow's
#: PyTorchJob gives each pod ``RANK`` and ``WORLD_SIZE`` only): its local rank is 0, its node its rank.
KUBERNETES_POD_ENV = "KUBERNETES_SERVICE_HOST"
#: Set beside the launcher variables written from SLURM's (:mod:`fastcore_train.parallel.slurm`); its value is the rank.
SLURM_EXPORTED_ENV = "FASTCORE_TRAIN_FROM_SLURM"
#: Set beside the launcher variables an engine's integration wrote (:mod:`fastcore_train.integrations`); its value is the engine.
INTEGRATION_ENV = "FASTCORE_TRAIN_INTEGRATION"


@dataclass(frozen=True)
class RankFacts:
    """Where this process stands in a job: global and local rank, world size, node, master."""

    rank: int
    local_rank: int
    world_size: int
    node_rank: int = 0
    #: ``host:port`` of rank 0's rendezvous where the launcher names it, else None.
    master_address: Optional[str] = None
    #: How the job was started: a launcher's name, ``"self-launched"`` or ``"single process"``.
    launcher: str = "single process"

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


SINGLE_PROCESS = RankFacts(rank=0, local_rank=0, world_size=1)


def _first_int(environ: Mapping[str, str], names: Iterable[str]) -> Optional[int]:
    for name in names:
        value = environ.get(name, "").strip()
        if value.lstrip("-").isdigit():
            return int(value)
    return None


def _launcher_name(environ: Mapping[str, str], name: str) -> str:
    if LAUNCHED_RANK_ENV in environ:
        return "self-launched"
    if environ.get(INTEGRATION_ENV):
        return environ[INTEGRATION_ENV]
    return "srun" if SLURM_EXPORTED_ENV in environ else name


def _first_text(environ: Mapping[str, str], names: Iterable[str]) -> Optional[str]:
    for name in names:
        if environ.get(name):
            return environ[name]
    return None


@dataclass(frozen=True)
class LaunchEnvironment:
    """The variables one launcher sets for each rank; each field lists names tried in order."""

    name: str
    rank: tuple[str, ...]
    world_size: tuple[str, ...]
    local_rank: tuple[str, ...] = ()
    local_world_size: tuple[str, ...] = ()
    node_rank: tuple[str, ...] = ()
    #: A variable holding ``host:port``, or one holding the host (then ``master_port`` the port).
    master_address: tuple[str, ...] = ()
    master_port: tuple[str, ...] = ()
    #: Launchers that list every rank's ``host:port`` (paddle's): the list, and this rank's entry.
    endpoints: tuple[str, ...] = ()
    current_endpoint: tuple[str, ...] = ()

    def detect(self, environ: Optional[Mapping[str, str]] = None) -> Optional[RankFacts]:
        """This process's rank facts when this launcher started it, else None."""
        environ = os.environ if environ is None else environ
        rank = _first_int(environ, self.rank)
        world_size = _first_int(environ, self.world_size)
        if rank is None or world_size is None or rank < 0 or world_size < 1 or rank >= world_size:
            return None
        local_rank = _first_int(environ, self.local_rank)
        local_world_size = _first_int(environ, self.local_world_size)
        node_rank = _first_int(environ, self.node_rank)
        if local_rank is None and local_world_size is None and environ.get(KUBERNETES_POD_ENV):
            local_rank, local_world_size = 0, 1  # one rank per pod: it owns the pod's device 0
        if node_rank is None:
            node_rank = rank // local_world_size if local_world_size else 0
        address = _first_text(environ, self.master_address)
        port = _first_text(environ, self.master_port)
        if address is not None and port is not None and ":" not in address:
            address = f"{address}:{port}"
        return RankFacts(rank=rank, local_rank=rank if local_rank is None else local_rank, world_size=world_size,
                         node_rank=node_rank, master_address=address,
                         launcher=_launcher_name(environ, self.name))

    def variables_for(self, rank: int, world_size: int, master_host: str, master_port: int) -> dict[str, str]:
        """The variables to start rank ``rank`` of a one-machine job with, as this launcher would."""
        variables = {self.rank[0]: str(rank), self.world_size[0]: str(world_size)}
        for names, value in ((self.local_rank, rank), (self.local_world_size, world_size), (self.node_rank, 0)):
            if names:
                variables[names[0]] = str(value)
        if self.master_port:
            variables.update({self.master_address[0]: master_host, self.master_port[0]: str(master_port)})
        elif self.master_address:
            variables[self.master_address[0]] = f"{master_host}:{master_port}"
        return variables


    def variables_of(self, facts: RankFacts, local_world_size: int, hosts: Sequence[str] = ()) -> dict[str, str]:
        """The variables this launcher would give the rank ``facts`` describes, on any number of
        machines (``facts.master_address`` is ``host:port``; ``hosts`` each rank's host, for a
        launcher that lists every rank's endpoint: there ``port + 1 + local rank``)."""
        if facts.master_address is None:
            raise ValueError(f"{self.name}'s variables need the master's host:port, got facts without one.")
        host, port = facts.master_address.rsplit(":", 1)
        variables = self.variables_for(facts.rank, facts.world_size, host, int(port))
        for names, value in ((self.local_rank, facts.local_rank), (self.local_world_size, local_world_size),
                             (self.node_rank, facts.node_rank)):
            if names:
                variables[names[0]] = str(value)
        if self.endpoints and hosts:
            slots = [sum(1 for earlier in hosts[:rank] if earlier == host_of) for rank, host_of in enumerate(hosts)]
            listed = [f"{host_of}:{int(port) + 1 + slot}" for host_of, slot in zip(hosts, slots)]
            variables[self.endpoints[0]] = ",".join(listed)
            if self.current_endpoint:
                variables[self.current_endpoint[0]] = listed[facts.rank]
        return variables


# The launchers of the built-in backends. torchrun and oneflow's launcher use the same variables;
# ``import oneflow`` writes RANK=-1 into a plain process, which reads as "not launched".
TORCHRUN = LaunchEnvironment(
    "torchrun", rank=("RANK",), world_size=("WORLD_SIZE",), local_rank=("LOCAL_RANK",),
    local_world_size=("LOCAL_WORLD_SIZE",), node_rank=("GROUP_RANK",), master_address=("MASTER_ADDR",),
    master_port=("MASTER_PORT",))
ONEFLOW_LAUNCH = LaunchEnvironment(
    "oneflow.distributed.launch", rank=("RANK",), world_size=("WORLD_SIZE",), local_rank=("LOCAL_RANK",),
    local_world_size=("LOCAL_WORLD_SIZE",), master_address=("MASTER_ADDR",), master_port=("MASTER_PORT",))
PADDLE_LAUNCH = LaunchEnvironment(
    "paddle.distributed.launch", rank=("PADDLE_TRAINER_ID", "PADDLE_GLOBAL_RANK"),
    world_size=("PADDLE_TRAINERS_NUM", "PADDLE_GLOBAL_SIZE"), local_rank=("PADDLE_LOCAL_RANK", "PADDLE_RANK_IN_NODE"),
    local_world_size=("PADDLE_LOCAL_SIZE",), master_address=("PADDLE_MASTER",),
    endpoints=("PADDLE_TRAINER_ENDPOINTS",), current_endpoint=("PADDLE_CURRENT_ENDPOINT",))
MPIRUN = LaunchEnvironment(
    "mpirun", rank=("OMPI_COMM_WORLD_RANK", "PMI_RANK"), world_size=("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"),
    local_rank=("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"),
    local_world_size=("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"), node_rank=("OMPI_COMM_WORLD_NODE_RANK",))


class UnlaunchedNodeError(RuntimeError):
    """The process is one node of a multi-node job (say a Kubeflow PaddleJob pod) that no launcher
    started ranks on: trained alone, each node would be a separate run instead of one job."""


def detect_rank_facts(environments: Iterable[LaunchEnvironment],
                      environ: Optional[Mapping[str, str]] = None) -> RankFacts:
    """The facts of the first of ``environments`` that launched this process, or :data:`SINGLE_PROCESS`.

    A process whose environment names several paddle nodes (``PADDLE_NNODES``, set by the PaddleJob
    operator for paddle's launcher to read) but holds no rank is refused with
    :class:`UnlaunchedNodeError`: each pod would otherwise train alone on the whole data.
    """
    environ = os.environ if environ is None else environ
    for environment in environments:
        facts = environment.detect(environ)
        if facts is not None:
            return facts
    refuse_unlaunched_node(environ)
    return SINGLE_PROCESS


def refuse_unlaunched_node(environ: Optional[Mapping[str, str]] = None) -> None:
    """Raise :class:`UnlaunchedNodeError` when ``environ`` names several paddle nodes
    (``PADDLE_NNODES``, which the PaddleJob operator sets for paddle's launcher) and no launcher gave
    this process a rank: called where no launcher's variables were found."""
    nodes = _first_int(os.environ if environ is None else environ, ("PADDLE_NNODES",))
    if nodes is not None and nodes > 1:
        raise UnlaunchedNodeError(
            f"PADDLE_NNODES={nodes} says this process is one node of a {nodes}-node paddle job, but no launcher "
            "started ranks here (no PADDLE_TRAINER_ID): each node would train alone on the whole data. Start the "
            "script with paddle's launcher on every node: python -m paddle.distributed.launch train.py.")
