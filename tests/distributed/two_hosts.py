"""Two "hosts" on one machine for the multi-node tests: two network namespaces, each with its own
loopback and one address on a private /24, joined by a veth pair (traffic between them crosses a
real link). Made and removed by the test itself (root only), with names and a subnet of its own
per run, and removed also when the test fails. The hostname still resolves to 127.0.0.1 in each,
as on many images: exactly the case where a rank must not advertise what the hostname says.
"""
from __future__ import annotations

import ipaddress
import os
import random
import shutil
import signal
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Iterator, Optional

from tests.distributed.listening import SocketWatch, processes_in_namespace


@dataclass(frozen=True)
class Host:
    namespace: str
    interface: str
    address: str

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this host."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def set_link(self, up: bool) -> None:
        """Bring this host's end of the link down (the host lost: the other side's packets vanish, no
        reset reaches anyone) or up again."""
        _ip("-n", self.namespace, "link", "set", self.interface, "up" if up else "down")

    def pids(self) -> list[int]:
        """Every process inside this host now (read from /proc: cheap enough to poll)."""
        return processes_in_namespace(self.namespace)

    def kill_everything(self) -> None:
        """Kill every process inside this host (a launcher's ranks may run in sessions of their own)."""
        found = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True).stdout
        for pid in found.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def unavailable() -> Optional[str]:
    """Why two hosts cannot be made here, or None."""
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.0.0.0/8 that no interface of this machine uses."""
    used = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    for _ in range(100):
        subnet = ipaddress.ip_network(f"10.{random.randint(100, 250)}.{random.randint(0, 255)}.0/24")
        if f" 10.{subnet.network_address.packed[1]}.{subnet.network_address.packed[2]}." not in used:
            return subnet
    raise RuntimeError("no free 10.x.y.0/24 subnet found for the two test hosts")


@contextmanager
def two_hosts() -> Iterator[tuple[Host, Host]]:
    """Two hosts joined by a link; removed on the way out, whatever happened."""
    tag = f"{os.getpid() % 100000}{random.randint(0, 999):03d}"
    subnet = _free_subnet()
    hosts = tuple(Host(f"fct{tag}{side}", f"fv{tag}{side}", str(subnet.network_address + index + 1))
                  for index, side in enumerate("ab"))
    try:
        for host in hosts:
            _ip("netns", "add", host.namespace)
        _ip("link", "add", hosts[0].interface, "type", "veth", "peer", "name", hosts[1].interface)
        for host in hosts:
            _ip("link", "set", host.interface, "netns", host.namespace)
            _configure(host)
        yield hosts  # type: ignore[misc]
    finally:
        for host in hosts:
            host.kill_everything()
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)  # removes its veth end too


def _configure(host: Host) -> None:
    _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
    _ip("-n", host.namespace, "link", "set", host.interface, "up")
    _ip("-n", host.namespace, "link", "set", "lo", "up")


@contextmanager
def two_hosts_and_a_stranger() -> Iterator[tuple[Host, Host, Host]]:
    """Two hosts and a third, the stranger's, on one network: each host's link goes to a bridge (a switch, in a
    namespace of its own), as machines on one cluster network are. Removed on the way out, whatever happened."""
    tag = f"{os.getpid() % 100000}{random.randint(0, 999):03d}"
    subnet = _free_subnet()
    hosts = tuple(Host(f"fct{tag}{side}", f"fv{tag}{side}", str(subnet.network_address + index + 1))
                  for index, side in enumerate("abc"))
    switch, bridge = f"fct{tag}s", f"fb{tag}"
    try:
        _ip("netns", "add", switch)
        _ip("-n", switch, "link", "add", bridge, "type", "bridge")
        _ip("-n", switch, "link", "set", bridge, "up")
        for host in hosts:
            _ip("netns", "add", host.namespace)
            port = f"fw{host.interface[2:]}"  # the switch's end of this host's link
            _ip("link", "add", host.interface, "netns", host.namespace, "type", "veth", "peer", "name", port,
                "netns", switch)
            _ip("-n", switch, "link", "set", port, "master", bridge)
            _ip("-n", switch, "link", "set", port, "up")
            _configure(host)
        yield hosts  # type: ignore[misc]
    finally:
        for host in hosts:
            host.kill_everything()
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)
        subprocess.run(["ip", "netns", "del", switch], capture_output=True)  # the bridge and the links' other ends


@contextmanager
def watching(hosts: tuple[Host, ...]) -> Iterator[list[SocketWatch]]:
    """One :class:`SocketWatch` per host, over every process inside it (whoever started it: a launcher, an
    rsh agent's daemon), from now until the block ends; each watch's ``seen`` is then that host's sockets."""
    watches = [SocketWatch(partial(processes_in_namespace, host.namespace)).start() for host in hosts]
    try:
        yield watches
    finally:
        for watch in watches:
            watch.stop()


@contextmanager
def host_names(hosts: tuple[Host, ...], names: list[str]) -> Iterator[None]:
    """Each name resolves to its host's address inside every host (``/etc/netns/NS/hosts``), the rest
    of /etc/hosts as it is (the machine's hostname still 127.0.0.1)."""
    base = Path("/etc/hosts").read_text()
    folders = [Path("/etc/netns") / host.namespace for host in hosts]
    try:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hosts").write_text(base + "".join(f"{host.address} {name}\n" for host, name in zip(hosts, names)))
        yield
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def srun_variables(node: int, local: int, per_node: int, nodelist: str, names: list[str], job_id: int) -> dict:
    """What ``srun`` sets for task ``local`` on node ``node`` of a 2-node step (``--ntasks-per-node``)."""
    world = 2 * per_node
    return {"SLURM_JOB_ID": str(job_id), "SLURM_JOBID": str(job_id), "SLURM_JOB_NAME": "train", "SLURM_STEP_ID": "0",
            "SLURM_NTASKS": str(world), "SLURM_NPROCS": str(world), "SLURM_STEP_NUM_TASKS": str(world),
            "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_STEP_NUM_NODES": "2",
            "SLURM_JOB_NODELIST": nodelist, "SLURM_NODELIST": nodelist, "SLURM_STEP_NODELIST": nodelist,
            "SLURM_TASKS_PER_NODE": f"{per_node}(x2)", "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x2)",
            "SLURM_NTASKS_PER_NODE": str(per_node), "SLURM_NODEID": str(node), "SLURMD_NODENAME": names[node],
            "SLURM_PROCID": str(node * per_node + local), "SLURM_LOCALID": str(local)}
