"""The job's TCP store, made by the driver so that rank 0 listens only where its ranks reach it (issue 39).

``init_process_group("env://")`` makes rank 0 host a ``TCPStore`` that listens on every interface (torch's
libuv server binds ``::``, else ``0.0.0.0``, whatever ``MASTER_ADDR`` says), and makes the other ranks wait
for it silently for the store's whole timeout. Instead, rank 0 binds a socket to ``MASTER_ADDR`` itself when
that address is this machine's (the loopback address for a one-machine job, the master's link address
across machines) and hands it over (``TCPStore(master_listen_fd=...)``); the other ranks first reach it
through :func:`~fastcore_train.parallel.reach.wait_for_master`, which says what it waits for and fails
clearly. Every rank passes its store to ``init_process_group`` (all the same way: a store given there is
used without the prefix ``env://`` adds, so one rank on ``env://`` would never meet the others). Gloo
(and NCCL's bootstrap, and TensorPipe) bind to the interface their variables name: on one machine the
loopback interface, across machines the one of the route toward the master, unless the user chose one.
"""
from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Optional

import torch.distributed as dist

from fastcore_train.parallel.loopback import choose_interfaces_from_environment, loopback_address
from fastcore_train.parallel.reach import too_few_joined, wait_for_master
from fastcore_train.parallel.route import interface_with

#: The variables torch's transports read to choose the interface they bind to.
INTERFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def choose_transport_interfaces(world_size: int) -> dict[str, str]:
    """Before ``init_process_group``: gloo/NCCL/TensorPipe bind to the loopback interface when every rank
    is on this machine, else to the interface of the route toward ``MASTER_ADDR``, unless the user set
    their variables; returns what was set."""
    return choose_interfaces_from_environment(INTERFACE_VARIABLES, world_size)


def _listen_address(host: str) -> Optional[str]:
    """The address rank 0 binds the store to: ``host``'s when it is held by this machine, else None (every
    interface, as torch does: a ``MASTER_ADDR`` that names no address of rank 0's machine)."""
    loopback = loopback_address(host)
    if loopback is not None:
        return loopback
    try:
        address = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)[0][4][0]
    except (socket.gaierror, UnicodeError, IndexError):
        return None
    return address if interface_with(address) is not None else None


def _listening_socket(address: str, port: int, world_size: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, port))
        listener.listen(max(128, world_size))
    except OSError as error:
        listener.close()
        raise RuntimeError(f"rank 0 could not listen on MASTER_ADDR:MASTER_PORT = {address}:{port} for the job's "
                           f"TCP store ({error}); another process may hold the port: choose a free MASTER_PORT.") from error
    return listener


def job_store(rank: int, world_size: int, connect_timeout: float, timeout: timedelta) -> Optional[dist.TCPStore]:
    """The job's store, from ``MASTER_ADDR``/``MASTER_PORT``: rank 0 hosts it (listening on the master's
    address where it is this machine's) and waits ``connect_timeout`` seconds for every rank to join; the
    others reach it within ``connect_timeout`` or say why not. Store operations then get ``timeout``. None
    where torchrun's agent store serves (or the variables are missing): ``env://`` decides, on every rank."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True):
        return None
    host, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    if not host or not port.isdigit():
        return None
    use_libuv = os.environ.get("USE_LIBUV", "1") == "1"
    joining = timedelta(seconds=connect_timeout)
    if rank != 0:
        wait_for_master(host, int(port), rank, connect_timeout)
        store = dist.TCPStore(host, int(port), world_size, False, joining, use_libuv=use_libuv)
    else:
        address = _listen_address(host)
        listen = {} if address is None else {"master_listen_fd": _listening_socket(address, int(port), world_size).detach()}
        try:
            store = dist.TCPStore(address or host, int(port), world_size, True, joining, multi_tenant=True,
                                  use_libuv=use_libuv, **listen)
        except dist.DistStoreError as error:
            raise dist.DistStoreError(too_few_joined(host, int(port), world_size, connect_timeout, str(error))) from error
    store.set_timeout(timeout)
    return store
