"""Which of this machine's interfaces leads to a job's master (issue 39), as Ray and Horovod find it.

A rank must advertise the address its peers can reach. What the hostname resolves to is no answer
(often 127.0.0.1, from /etc/hosts): the address that counts is the one this machine's route toward
the master leaves from. Connecting a UDP socket sends nothing, but makes the kernel choose that
route; the socket's own address is then the source address, and the interface holding it is the
one to bind gloo, NCCL and TensorPipe to. Linux only (``/proc``, ``SIOCGIFADDR``); elsewhere None.
"""
from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from typing import Optional

_SIOCGIFADDR = 0x8915


def source_address(host: str, port: int = 9) -> Optional[str]:
    """The address this machine's route toward ``host`` leaves from, or None (no route, a name that
    does not resolve)."""
    try:
        family, _, _, _, target = socket.getaddrinfo(host, port, proto=socket.IPPROTO_UDP)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(target)  # chooses the route; sends nothing
            return probe.getsockname()[0]
    except (OSError, UnicodeError, IndexError):
        return None


def interface_with(address: str) -> Optional[str]:
    """The name of the interface that holds ``address`` on this machine, or None."""
    try:
        wanted = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return None
    if wanted.version == 6:
        return _ipv6_interface(wanted)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            try:
                request = struct.pack("256s", name.encode()[:15])
                found = socket.inet_ntoa(fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)[20:24])
            except OSError:  # an interface without an IPv4 address
                continue
            if ipaddress.ip_address(found) == wanted:
                return name
    return None


def _ipv6_interface(wanted: ipaddress.IPv6Address) -> Optional[str]:
    try:
        with open("/proc/net/if_inet6") as table:
            for line in table:
                fields = line.split()
                if len(fields) >= 6 and ipaddress.ip_address(int(fields[0], 16)) == wanted:
                    return fields[5]
    except OSError:
        return None
    return None


def interface_toward(host: str) -> Optional[tuple[str, str]]:
    """``(interface name, source address)`` of the route toward ``host``, or None when it is unknown."""
    address = source_address(host)
    if address is None:
        return None
    name = interface_with(address)
    return None if name is None else (name, address)
