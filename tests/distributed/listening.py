"""The sockets a job's processes listen on, read from ``/proc`` (Linux), for the tests that check who can
reach a job (issue 39).

A job is a process tree (a launcher, its ranks, their helpers). Each process's open sockets are the
``socket:[inode]`` links under ``/proc/<pid>/fd``; the sockets of the process's network namespace are in
``/proc/<pid>/net/{tcp,tcp6,udp,udp6}``. A listening socket is a TCP one in state LISTEN or a UDP one that is
not connected (what ``ss -ltnup`` lists).
"""
from __future__ import annotations

import ipaddress
import os
import socket
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Union

_TCP_LISTEN = "0A"
_TCP_ESTABLISHED = "01"
_UDP_UNCONNECTED = "07"
_TABLES = (("tcp", "tcp", socket.AF_INET), ("tcp", "tcp6", socket.AF_INET6),
           ("udp", "udp", socket.AF_INET), ("udp", "udp6", socket.AF_INET6))


@dataclass(frozen=True)
class Listening:
    """One listening socket: protocol, the address it is bound to, its port, and the process holding it."""

    protocol: str
    address: str
    port: int
    pid: int
    command: str

    @property
    def loopback(self) -> bool:
        """Whether only this host can reach it (127.0.0.0/8, ::1, or IPv4-mapped loopback)."""
        address = ipaddress.ip_address(self.address)
        mapped = getattr(address, "ipv4_mapped", None)
        return address.is_loopback or (mapped is not None and mapped.is_loopback)

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.protocol} {host}:{self.port} ({self.command}, pid {self.pid})"


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def _parent_of(pid: int) -> Optional[int]:
    stat = _read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (name)": state, ppid, ...
    except (IndexError, ValueError):
        return None


def process_tree(root: int) -> list[int]:
    """``root`` and every process descended from it that is alive now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _parent_of(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def processes_in_namespace(namespace: str) -> list[int]:
    """Every process alive now in the network namespace ``namespace`` (a name under ``/run/netns``, as
    ``ip netns add`` makes it): a simulated host's processes, whoever started them."""
    try:
        inode = os.stat(f"/run/netns/{namespace}").st_ino
    except OSError:
        return []
    wanted, found = f"net:[{inode}]", []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/net") == wanted:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _socket_descriptors(pid: int) -> dict[str, int]:
    """Process ``pid``'s socket inodes, each with a file descriptor of the process that holds it ({} if
    the process is gone or not ours to read)."""
    by_inode: dict[str, int] = {}
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                by_inode[target[8:-1]] = int(fd)
    except OSError:
        pass
    return by_inode


def _socket_inodes(pid: int) -> set[str]:
    return set(_socket_descriptors(pid))


def _address(hex_address: str, family: int) -> str:
    raw = bytes.fromhex(hex_address)
    # the kernel prints each 32-bit word in host (little-endian) order
    packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(family, packed)


def _listening_table(pid: int) -> dict[str, tuple[str, str, int]]:
    """Inode -> (protocol, address, port) of every listening socket in ``pid``'s network namespace."""
    table = {}
    for protocol, name, family in _TABLES:
        for line in _read(f"/proc/{pid}/net/{name}").splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10:
                continue
            local, state, inode = fields[1], fields[3], fields[9]
            if state != (_TCP_LISTEN if protocol == "tcp" else _UDP_UNCONNECTED):
                continue
            address, port = local.rsplit(":", 1)
            table[inode] = (protocol, _address(address, family), int(port, 16))
    return table


def connected_addresses(pid: int) -> set[tuple[str, str]]:
    """``(local address, remote address)`` of every established TCP connection process ``pid`` holds now
    (IPv4-mapped IPv6 addresses written as IPv4): which interfaces its traffic crosses."""
    inodes = _socket_inodes(pid)
    found = set()
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in _read(f"/proc/{pid}/net/{name}").splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _TCP_ESTABLISHED or fields[9] not in inodes:
                continue
            ends = [ipaddress.ip_address(_address(end.rsplit(":", 1)[0], family)) for end in fields[1:3]]
            found.add(tuple(str(getattr(end, "ipv4_mapped", None) or end) for end in ends))
    return found


def connected_sockets(pid: int, address: str, port: int) -> list[int]:
    """The file descriptors of process ``pid`` (this process, to use them) that hold an established TCP
    connection to ``address:port``."""
    by_inode = _socket_descriptors(pid)
    if not by_inode:
        return []
    found = []
    wanted = ipaddress.ip_address(address)
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in _read(f"/proc/{pid}/net/{name}").splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _TCP_ESTABLISHED or fields[9] not in by_inode:
                continue
            remote, remote_port = fields[2].rsplit(":", 1)
            seen = ipaddress.ip_address(_address(remote, family))
            if int(remote_port, 16) == port and (getattr(seen, "ipv4_mapped", None) or seen) == wanted:
                found.append(by_inode[fields[9]])
    return found


def _command(pid: int) -> str:
    return _read(f"/proc/{pid}/comm").strip() or "?"


def listening_sockets(pids: Iterable[int]) -> set[Listening]:
    """Every socket the processes ``pids`` listen on now."""
    found: set[Listening] = set()
    tables: dict[str, dict[str, tuple[str, str, int]]] = {}
    for pid in pids:
        command = _command(pid)  # read first: a process that ends meanwhile is left out, never listed as "?"
        inodes = _socket_inodes(pid) if command != "?" else set()
        if not inodes:
            continue
        try:
            namespace = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        if namespace not in tables:
            tables[namespace] = _listening_table(pid)
        for inode in inodes & tables[namespace].keys():
            protocol, address, port = tables[namespace][inode]
            found.add(Listening(protocol, address, port, pid, command))
    return found


class SocketWatch:
    """Lists the listening sockets of the process tree under ``root`` (or of the processes ``root()``
    returns, e.g. a host's: :func:`processes_in_namespace`) every ``every`` seconds from :meth:`start` to
    :meth:`stop`, so that sockets open only for a moment (a rendezvous) are seen too.
    ``seen``: every socket found; :meth:`now`: a listing taken at once."""

    def __init__(self, root: Union[int, Callable[[], Iterable[int]]], every: float = 0.05) -> None:
        self.root, self.every = root, every
        self._processes = root if callable(root) else (lambda: process_tree(root))
        self.seen: set[Listening] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="socket-watch", daemon=True)

    def now(self) -> set[Listening]:
        sockets = listening_sockets(self._processes())
        self.seen |= sockets
        return sockets

    def _run(self) -> None:
        while not self._stop.is_set():
            self.now()
            self._stop.wait(self.every)

    def start(self) -> "SocketWatch":
        self._thread.start()
        return self

    def stop(self) -> set[Listening]:
        self._stop.set()
        self._thread.join()
        return self.seen


def describe(sockets: Iterable[Listening]) -> str:
    """The sockets one per line, sorted, for a test's failure message."""
    return "\n".join(sorted(str(listening) for listening in sockets)) or "(none)"
