"""Which sockets a job may listen on beyond where it should (issue 39), for the tests that list them
(``tests/distributed/listening.py``): on one machine only loopback, across hosts only loopback and the
host's own link address, except what a framework opens wider with no setting to narrow it. Each such
exception is written here once, per backend and way of starting, with why and how many; the evidence is
in docs/security.md, "What cannot be narrowed".
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

from tests.distributed.listening import Listening, describe


@dataclass(frozen=True)
class Place:
    """Where a job's sockets were listed: its first process (one machine), or which host of two (0: the
    master's), that host's own link address and how many ranks run there."""

    root: Optional[int] = None
    node: int = 0
    link: Optional[str] = None
    ranks: int = 2  # ranks on this host


@dataclass(frozen=True)
class OpenByFramework:
    """Sockets a framework opens wider than it should with no setting to narrow them: which (``matches``),
    why (``what``), and how many different address:port pairs at most (for each rank on the host: ``per_rank``)."""

    what: str
    matches: Callable[[Listening, Place], bool]
    at_most: int
    per_rank: bool = False  # at_most for each rank on the host


def _unmapped(address: str) -> str:
    parsed = ipaddress.ip_address(address)
    return str(getattr(parsed, "ipv4_mapped", None) or parsed)


def narrow(listening: Listening, place: Place) -> bool:
    """Bound where only the job's own ranks can reach it: loopback, or (across hosts) the host's own link address."""
    return listening.loopback or (place.link is not None and _unmapped(listening.address) == place.link)


def wildcard(listening: Listening) -> bool:
    """Bound to every interface (``0.0.0.0`` or ``::``)."""
    return ipaddress.ip_address(listening.address).is_unspecified


def problems(label: str, sockets: Iterable[Listening], place: Place,
             allowed: Sequence[OpenByFramework] = ()) -> list[str]:
    """What is wrong with ``sockets`` (empty: nothing): a socket neither :func:`narrow` nor named by an entry of
    ``allowed``, or an entry naming more than its ``at_most`` (a socket counts for the first entry naming it)."""
    sockets = set(sockets)
    wide = {listening for listening in sockets if not narrow(listening, place)}
    claimed: dict[int, set[Listening]] = {index: set() for index in range(len(allowed))}
    unexpected = set()
    for listening in wide:
        index = next((index for index, entry in enumerate(allowed) if entry.matches(listening, place)), None)
        if index is None:
            unexpected.add(listening)
        else:
            claimed[index].add(listening)
    found = []
    if unexpected:
        where = "loopback" if place.link is None else f"loopback and its link address {place.link}"
        found.append(f"{label} listens beyond {where}:\n{describe(unexpected)}\n"
                     f"all its listening sockets:\n{describe(sockets)}")
    for index, entry in enumerate(allowed):
        limit = entry.at_most * (place.ranks if entry.per_rank else 1)
        ports = {(listening.address, listening.port) for listening in claimed[index]}
        if len(ports) > limit:
            found.append(f"{label}: more sockets open than {entry.what} ({limit}):\n{describe(claimed[index])}")
    return found


def _mpirun(listening: Listening, place: Place) -> bool:
    return listening.command in ("prterun", "mpirun", "orterun")


def _rank(listening: Listening, place: Place) -> bool:
    return listening.command.startswith("python")


#: One machine, per backend and way of starting ("self", "launch", "launcher"): what stays open beyond loopback.
OPEN_BY_FRAMEWORK: dict[tuple[str, str], tuple[OpenByFramework, ...]] = {
    ("torch", "launcher"): (OpenByFramework("torchrun's agent: its rendezvous and worker TCP stores (torch's "
                                            "TCPStore server binds the wildcard address; torchrun has no bind option)",
                                            lambda listening, place: listening.pid == place.root, 2),),
    **{("paddle", way): (OpenByFramework("rank 0's TCP store (paddle binds it to 0.0.0.0, whatever PADDLE_MASTER says)",
                                         lambda listening, place: _rank(listening, place) and listening.address == "0.0.0.0",
                                         1),)
       for way in ("self", "launch", "launcher")},
    **{("jittor", way): (OpenByFramework("mpirun's out-of-band channel (PRRTE's oob tcp binds 0.0.0.0 and [::]; "
                                         "oob_tcp_if_include=lo aborts mpirun)", _mpirun, 2),)
       for way in ("self", "launch", "launcher")},
    **{("oneflow", way): (OpenByFramework("each rank's control and data ports (oneflow 0.9 binds them to every "
                                          "interface and has no setting for the address: rank 0 its bootstrap, control "
                                          "and data ports, the others control and data)", _rank, 5),)
       for way in ("self", "launch", "launcher")},
}

#: Two hosts, per backend and way of starting ("launcher": torchrun, paddle's, oneflow's; "mpirun"; "slurm"):
#: what stays open beyond loopback and each host's own link address (docs/security.md, "Across machines").
OPEN_ACROSS_HOSTS: dict[tuple[str, str], tuple[OpenByFramework, ...]] = {
    # torch under srun: rank 0's store on the master's link (fastcore_train binds it), gloo on each host's link: nothing.
    # Matched by host and address, not by process: a process just forked holds its parent's sockets until it
    # execs; each socket counts once (its address and port), so one opened by anything else still fails.
    ("torch", "launcher"): (
        OpenByFramework("node0's torchrun agent: the static rendezvous's TCP store at --master_port, which the workers "
                        "use as their store too (torch's TCPStore server binds the wildcard address; torchrun has no "
                        "bind option)",
                        lambda listening, place: place.node == 0 and wildcard(listening), 1),),
    ("paddle", "launcher"): (
        OpenByFramework("node0's paddle launcher: the launchers' meeting point at --master's port (KVServer binds ''), "
                        "and rank 0's TCP store at PADDLE_MASTER's port (paddle 3.3 binds it to 0.0.0.0 whatever "
                        "address it is given)",
                        lambda listening, place: place.node == 0 and listening.address == "0.0.0.0", 2),),
    ("paddle", "slurm"): (
        OpenByFramework("node0's rank 0: the job's TCP store at PADDLE_MASTER's port (paddle 3.3 binds it to 0.0.0.0 "
                        "whatever address it is given)",
                        lambda listening, place: place.node == 0 and listening.address == "0.0.0.0", 1),),
    ("oneflow", "launcher"): (
        OpenByFramework("each rank's oneflow 0.9 ports, on every interface with no setting for the address: its "
                        "control (gRPC) port on [::], rank 0's the bootstrap port (--master_port), and, as the ranks "
                        "connect, up to two more (seen: one more on [::], one on 0.0.0.0)",
                        lambda listening, place: _rank(listening, place) and wildcard(listening), 3, per_rank=True),),
    ("jittor", "mpirun"): (
        OpenByFramework("each rank's Open MPI TCP transport (btl tcp binds 0.0.0.0 and [::] from port "
                        "btl_tcp_port_min_v4/v6 = 1024 up; btl_tcp_if_include chooses only where it sends)",
                        lambda listening, place: _rank(listening, place) and wildcard(listening), 2, per_rank=True),
        OpenByFramework("the host's PRRTE daemon (mpirun's prterun on node0, prted on node1): its out-of-band channel "
                        "on 0.0.0.0 and [::] (oob tcp binds the wildcard; oob_tcp_if_include chooses only the "
                        "addresses it advertises)",
                        lambda listening, place: listening.command in ("prterun", "prted", "mpirun", "orterun")
                        and wildcard(listening), 2)),
}


def check_one_machine(backend: str, way: str, sockets: Iterable[Listening], root: int) -> None:
    """A job on one machine: only loopback, beyond what ``OPEN_BY_FRAMEWORK`` names for ``backend``/``way``."""
    found = problems(f"{backend} ({way})", sockets, Place(root=root), OPEN_BY_FRAMEWORK.get((backend, way), ()))
    assert not found, "\n".join(found)


def check_two_hosts(backend: str, way: str, seen: Sequence[Iterable[Listening]], links: Sequence[str],
                    per_node: int) -> None:
    """A job on two hosts (``seen[n]``: what host n's processes listened on, ``links[n]``: its link address,
    ``per_node`` ranks on each): only loopback and the host's own link address, beyond what
    ``OPEN_ACROSS_HOSTS`` names; every problem on both hosts in one failure."""
    allowed = OPEN_ACROSS_HOSTS.get((backend, way), ())
    found = []
    for node, (sockets, link) in enumerate(zip(seen, links)):
        sockets = set(sockets)
        print(f"{backend} ({way}), node{node} ({link}):\n{describe(sockets)}")  # for `pytest -rP`
        if not sockets:
            found.append(f"{backend} ({way}): nothing seen listening on node{node}: the listing does not see the job")
        found += problems(f"{backend} ({way}) on node{node}", sockets, Place(node=node, link=link, ranks=per_node), allowed)
    assert not found, "\n".join(found)
