"""Which machine of a job each rank runs on, and which of them still answers (issue 39: a host lost).

At the start of a watched run (:func:`fastcore_train.parallel.watchdog.start_watchdog`) every rank
says where it runs: its hostname and its **link address**, the address of its route toward the job's
master (:mod:`fastcore_train.parallel.route`; the hostname alone is no name for a machine, as it
may resolve to 127.0.0.1 and, in containers or namespaces, be the same on several machines). Ranks
with the same (hostname, link address) share a machine and its heartbeat table.

When the watchdog gives up in a job over several machines, a rank sees only its own machine's
heartbeats; for the other machines it asks the network: one TCP connection attempt per machine
(to the master's port, or :data:`PROBE_PORT`), all at once, for at most :data:`PROBE_SECONDS`. A
machine that accepts or refuses the connection is up (its ranks are stuck or ended); one that does
not answer at all, or that the kernel says is unreachable, is **lost** (the machine stopped, or its
link is cut). A firewall that drops connections to that port looks lost too: the message says so.
"""
from __future__ import annotations

import errno
import ipaddress
import os
import socket
import threading
from dataclasses import dataclass
from typing import Optional, Sequence

#: Seconds the probe of the other machines may take (the watchdog ends the job right after).
PROBE_SECONDS = 3.0
#: The port probed when the job's master port is unknown (any port: an answer is "up", refused or not).
PROBE_PORT = 22
#: ``connect`` errors that mean the machine is up and said no.
_ANSWERED = (errno.ECONNREFUSED, errno.ECONNRESET)


@dataclass(frozen=True)
class Place:
    """Where one rank runs: its hostname and its link address (None when no master address is known)."""

    hostname: str
    address: Optional[str] = None

    def name(self) -> str:
        """How a message names the machine: the link address (and the hostname when it says more)."""
        if self.address is None:
            return self.hostname
        if self.hostname in ("", "localhost") or self.hostname == self.address:
            return self.address
        return f"{self.address} ({self.hostname})"


def link_address(master_address: Optional[str]) -> Optional[str]:
    """This machine's address toward the job's master (``host:port``), or toward mpirun's host for an
    Open MPI rank whose interface was chosen (``OMPI_MCA_btl_tcp_if_include``); None when unknown or
    loopback (a job on one machine, whose ranks may not all know the master's address)."""
    from fastcore_train.parallel.route import source_address

    if master_address:
        host = master_address.rsplit(":", 1)[0].strip("[]") if ":" in master_address else master_address
        found = source_address(host)
        if found is not None:  # a loopback master: a job on one machine, which its hostname names
            return None if ipaddress.ip_address(found.split("%")[0]).is_loopback else found
    interface = os.environ.get("OMPI_MCA_btl_tcp_if_include", "")
    if interface and "," not in interface and "/" not in interface:
        found = _interface_address(interface)
        return None if found is None or ipaddress.ip_address(found).is_loopback else found
    return None


def _interface_address(interface: str) -> Optional[str]:
    import fcntl
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            request = struct.pack("256s", interface.encode()[:15])
            return socket.inet_ntoa(fcntl.ioctl(probe.fileno(), 0x8915, request)[20:24])  # SIOCGIFADDR
    except OSError:
        return None


def here(master_address: Optional[str]) -> Place:
    """This rank's :class:`Place`."""
    return Place(socket.gethostname(), link_address(master_address))


def machines(places: Sequence[Place]) -> dict[Place, list[int]]:
    """The job's machines, each with its ranks, in order of their lowest rank."""
    found: dict[Place, list[int]] = {}
    for rank, place in enumerate(places):
        found.setdefault(place, []).append(rank)
    return found


def answers(address: str, port: int, seconds: float) -> Optional[str]:
    """How ``address`` answered a connection to ``port`` ("accepted", "refused"), or None: no answer
    within ``seconds``, or unreachable."""
    try:
        family, kind, proto, _, target = socket.getaddrinfo(address, port, proto=socket.IPPROTO_TCP)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.settimeout(seconds)
            code = probe.connect_ex(target)
    except (OSError, UnicodeError, IndexError):
        return None
    if code == 0:
        return "accepted"
    return "refused" if code in _ANSWERED else None


def probe_machines(addresses: Sequence[str], port: int, seconds: float = PROBE_SECONDS) -> dict[str, Optional[str]]:
    """:func:`answers` for every address at once (one thread each), within about ``seconds``."""
    results: dict[str, Optional[str]] = {address: None for address in addresses}

    def ask(address: str) -> None:
        results[address] = answers(address, port, seconds)

    threads = [threading.Thread(target=ask, args=(address,), daemon=True) for address in addresses]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 1.0)
    return results


def _ranks(ranks: Sequence[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def other_machines(mine: Place, places: Sequence[Place], master_address: Optional[str],
                   seconds: float = PROBE_SECONDS) -> str:
    """What a rank whose watchdog gives up says about the job's other machines: each one's address and
    ranks, and whether it still answers (see the module docstring)."""
    others = {place: ranks for place, ranks in machines(places).items() if place != mine}
    if not others:
        return ""
    port = PROBE_PORT
    if master_address and ":" in master_address and master_address.rsplit(":", 1)[1].isdigit():
        port = int(master_address.rsplit(":", 1)[1])
    probed = probe_machines([place.address for place in others if place.address], port, seconds)
    lost, up, unknown = [], [], []
    for place, ranks in others.items():
        said = probed.get(place.address) if place.address else "unknown"
        entry = f"host {place.name()} ({_ranks(ranks)})"
        (unknown if said == "unknown" else lost if said is None else up).append(entry)
    parts = []
    if lost:
        parts.append(f"Lost: {'; '.join(lost)}: no answer within {seconds:g} s to a connection to port {port} "
                     f"(that machine stopped or its network link is cut; a firewall dropping that port looks "
                     f"the same), so its ranks never arrived.")
    if up:
        parts.append(f"Still answering: {'; '.join(up)}: that machine is up, its ranks are stuck or ended (see "
                     "their own reports).")
    if unknown:
        parts.append(f"On other machines, address unknown (not probed): {'; '.join(unknown)}.")
    return " ".join(parts)
