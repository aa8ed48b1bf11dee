"""The interface an mpirun rank's TCP transport uses when the job spans several hosts (issue 39).

Open MPI's TCP transport (``btl tcp``) sends on every interface but loopback unless told otherwise, and a
peer's addresses are tried by what looks reachable: with a second interface on each host that shares a
subnet across hosts but reaches no other host (``docker0``'s 172.17.0.1 on every machine, a management
network), ranks try it and hang. The rule of :mod:`fastcore_train.parallel.loopback` applies here too: a rank
uses the interface of its route toward the master, here the host mpirun runs on. Before ``MPI_Init``
a rank has no master address in its environment, but its parent process has one:

- on the other hosts the parent is Open MPI's daemon (``prted``), started with ``--prtemca prte_hnp_uri
  "prterun-...@0.0;tcp://ADDR[,ADDR...]:PORT:..."``: the addresses mpirun's host listens on;
- on mpirun's own host the parent is mpirun (``prterun``), whose command names the hosts (``--host``,
  ``--hostfile``): the first one that is this host's own address, else the first one with a route.

``OMPI_MCA_btl_tcp_if_include`` is then that interface, unless the user chose (``btl_tcp_if_include`` or
``btl_tcp_if_exclude`` set in the environment). When nothing is found Open MPI's own choice stands. Linux
only (``/proc``); read before ``MPI_Init``, so ``import fastcore_train`` does it (:func:`choose_mpi_interface`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping, MutableMapping, Optional, Sequence

from fastcore_train.parallel.route import interface_toward, interface_with

_USER_CHOICE = ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_btl_tcp_if_exclude")
_HOST_OPTIONS = ("--host", "-host", "-H", "--hostfile", "-hostfile", "--machinefile", "-machinefile",
                 "--default-hostfile")
_URI = re.compile(r"tcp6?://\[?([^\]:/]+(?:,[^\]:/]+)*)\]?:\d+")


def hnp_addresses(argv: Sequence[str]) -> list[str]:
    """The addresses in a daemon's ``prte_hnp_uri`` (or ``prte_parent_uri``) argument, in order."""
    found: list[str] = []
    for name in ("prte_hnp_uri", "prte_parent_uri"):
        for index, arg in enumerate(argv[:-1]):
            if arg == name:
                for match in _URI.finditer(argv[index + 1]):
                    found += [address for address in match.group(1).split(",") if address not in found]
    return found


def named_hosts(argv: Sequence[str], cwd: Path) -> list[str]:
    """The hosts an mpirun command names (``--host a:2,b`` and hostfile lines ``a slots=2``), in order."""
    hosts: list[str] = []
    for index, arg in enumerate(argv[:-1]):
        option, value = arg, argv[index + 1]
        if option not in _HOST_OPTIONS:
            continue
        if "file" in option:
            try:
                lines = (cwd / value).read_text().splitlines()
            except OSError:
                continue
            names = [line.split("#")[0].split()[0] for line in lines if line.split("#")[0].strip()]
        else:
            names = [entry.split(":")[0] for entry in value.split(",")]
        hosts += [name for name in names if name and name not in hosts]
    return hosts


def _parent(pid: int) -> tuple[list[str], Path]:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        argv = Path(f"/proc/{parent}/cmdline").read_bytes().decode(errors="replace").split("\0")
        return [arg for arg in argv if arg], Path(os.readlink(f"/proc/{parent}/cwd"))
    except (OSError, ValueError, IndexError):
        return [], Path(".")


def master_interface(argv: Sequence[str], cwd: Path) -> Optional[str]:
    """The interface toward mpirun's host, read from the rank's parent's command (see the module doc)."""
    for address in hnp_addresses(argv):
        route = interface_toward(address)
        if route is not None and not route[1].startswith("127.") and route[1] != "::1":
            return route[0]
    candidates = named_hosts(argv, cwd)
    for host in candidates:  # this host's own address, as the command names it
        own = interface_with(host)
        if own is not None and not host.startswith("127."):
            return own
    for host in candidates:
        route = interface_toward(host)
        if route is not None and not route[1].startswith("127.") and route[1] != "::1":
            return route[0]
    return None


def choose_mpi_interface(environ: MutableMapping[str, str] = os.environ, pid: Optional[int] = None) -> dict[str, str]:
    """In a rank mpirun started on one of several hosts, before ``MPI_Init``: set Open MPI's TCP interface
    to the one toward mpirun's host, unless the user chose; returns what was set."""
    if not _across_hosts(environ) or any(environ.get(name) for name in _USER_CHOICE):
        return {}
    interface = master_interface(*_parent(os.getpid() if pid is None else pid))
    if interface is None:
        return {}
    environ["OMPI_MCA_btl_tcp_if_include"] = interface
    return {"OMPI_MCA_btl_tcp_if_include": interface}


def _across_hosts(environ: Mapping[str, str]) -> bool:
    size, local = environ.get("OMPI_COMM_WORLD_SIZE", ""), environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "")
    return size.isdigit() and local.isdigit() and int(local) < int(size)
