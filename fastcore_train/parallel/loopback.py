"""Keeping a one-machine job reachable only from its own machine (issue 39), written once for every backend.

A data-parallel job's control ports (torch's and paddle's TCP stores, gloo's pairs, Open MPI's transports)
carry no authentication: whoever reaches them can join or disturb the job. When every rank runs on this
machine, nothing needs to reach them from elsewhere, so each socket a framework lets us place is bound to
the loopback interface:

- a framework's interface variables (``GLOO_SOCKET_IFNAME`` and the like) are set to the loopback interface
  unless the user set them (:func:`keep_on_loopback`); across machines, to the interface of the route
  toward the master (:func:`choose_interfaces`);
- Open MPI's ranks on one machine talk over shared memory, not TCP (:func:`mpi_one_machine_settings`);
- a TCP store whose master address is loopback is bound there (:func:`loopback_address` says when).

What a framework cannot bind narrower is listed in docs/security.md with the evidence.
"""
from __future__ import annotations

import os
import socket
from typing import Mapping, MutableMapping, Optional, Sequence

#: The address the ranks of a job we start on this machine meet at.
LOOPBACK_HOST = "127.0.0.1"
_IFF_LOOPBACK = 0x8
#: Open MPI variables that name other machines: a job with one of them is not ours to keep on loopback.
_MPI_HOST_VARIABLES = ("OMPI_MCA_orte_default_hostfile", "PRTE_MCA_prte_default_hostfile", "OMPI_MCA_rmaps_base_hostfile")


def loopback_interface() -> str:
    """The name of this machine's loopback interface (``lo`` on Linux, read from /sys when it is there)."""
    try:
        names = sorted(os.listdir("/sys/class/net"))
    except OSError:
        names = []
    for name in names:
        try:
            with open(f"/sys/class/net/{name}/flags") as flags:
                if int(flags.read().strip(), 16) & _IFF_LOOPBACK:
                    return name
        except (OSError, ValueError):
            continue
    return "lo0" if os.uname().sysname == "Darwin" else "lo"


def loopback_address(host: Optional[str]) -> Optional[str]:
    """The address ``host`` names when it is one loopback address (``127.0.0.1``, ``::1``, or a name that
    resolves to exactly one of them), else None: a master there can be reached from this machine only."""
    if not host:
        return None
    try:
        found = {entry[4][0] for entry in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (socket.gaierror, UnicodeError):
        return None
    if len(found) != 1:
        return None
    address = found.pop()
    return address if address.startswith("127.") or address == "::1" else None


def on_one_machine(master_host: Optional[str], world_size: Optional[int], local_world_size: Optional[int]) -> bool:
    """Whether every rank of a job runs on this machine: its master is a loopback address, or a launcher
    says all ``world_size`` ranks are local (``local_world_size`` equal to it)."""
    if loopback_address(master_host) is not None:
        return True
    return world_size is not None and world_size > 1 and local_world_size == world_size


def keep_on_loopback(names: Sequence[str], environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set each interface variable in ``names`` to the loopback interface where the user has not set it;
    returns what was set (a user's own value always wins)."""
    chosen = {name: loopback_interface() for name in names if not environ.get(name)}
    environ.update(chosen)
    return chosen


def choose_interfaces(names: Sequence[str], master_host: Optional[str], world_size: int,
                      local_world_size: Optional[int], environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set the interface variables in ``names`` that the user has not set: the loopback interface for a
    job on this machine (:func:`on_one_machine`), else the interface of this machine's route toward the
    master (:func:`~fastcore_train.parallel.route.interface_toward`), so that a rank advertises the address
    its peers reach, whatever the hostname resolves to. Returns what was set."""
    if on_one_machine(master_host, world_size, local_world_size):
        return keep_on_loopback(names, environ)
    from fastcore_train.parallel.route import interface_toward

    route = interface_toward(master_host) if master_host else None
    if route is None:
        return {}
    chosen = {name: route[0] for name in names if not environ.get(name)}
    environ.update(chosen)
    return chosen


def choose_interfaces_from_environment(names: Sequence[str], world_size: int, master_variable: str = "MASTER_ADDR",
                                       local_size_variable: str = "LOCAL_WORLD_SIZE",
                                       environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """:func:`choose_interfaces` with the master and the local world size read from a launcher's variables
    (``master_variable`` may be ``HOST`` or ``HOST:PORT``, as paddle's ``PADDLE_MASTER``); what each backend
    calls before its ranks meet."""
    master = environ.get(master_variable, "")
    if master.count(":") == 1:
        master = master.rsplit(":", 1)[0]
    local = environ.get(local_size_variable, "")
    return choose_interfaces(names, master or None, world_size, int(local) if local.isdigit() else None, environ)


def mpi_one_machine_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """Open MPI settings for ranks that all run on this machine, those the user has not set.

    Open MPI's TCP transport (``btl tcp``) listens on every interface, whatever ``btl_tcp_if_include``
    says (it only picks the interfaces it sends on), while ranks on one machine need only shared memory:
    ``btl=^tcp`` leaves it out. A job that names hosts (a hostfile variable) or chose its transports keeps
    its own settings.
    """
    if environ.get("OMPI_MCA_btl") or any(environ.get(name) for name in _MPI_HOST_VARIABLES):
        return {}
    return {"OMPI_MCA_btl": "^tcp"}


def mpi_rank_on_one_machine(environ: Mapping[str, str]) -> bool:
    """In a rank mpirun started: whether every rank of its job runs on this machine (Open MPI's world size
    equals its local size), read before ``MPI_Init`` so settings can still be chosen."""
    size, local = environ.get("OMPI_COMM_WORLD_SIZE", ""), environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "")
    return size.isdigit() and size == local


def keep_mpi_rank_off_tcp(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """In a rank mpirun started, before its framework calls ``MPI_Init`` (jittor does on import): when every
    rank runs on this machine, :func:`mpi_one_machine_settings`; returns what was set. ``import
    fastcore_train`` calls it, so a script that imports it before its framework needs nothing more."""
    if not mpi_rank_on_one_machine(environ):
        return {}
    chosen = mpi_one_machine_settings(environ)
    environ.update(chosen)
    return chosen
