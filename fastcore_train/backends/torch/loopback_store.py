"""Rank 0's TCP store on the loopback address when the job's master is there (issue 39).

``init_process_group("env://")`` makes rank 0 host a ``TCPStore`` that listens on every interface
(torch's libuv server binds ``::``, else ``0.0.0.0``, whatever ``MASTER_ADDR`` says), although ranks that
meet at a loopback ``MASTER_ADDR`` can only be on this machine. ``TCPStore`` accepts a socket that is
already listening (``master_listen_fd``): rank 0 binds one to ``MASTER_ADDR`` itself and hands it over,
and every rank passes its store to ``init_process_group`` (all the same way: a store given there is used
without the prefix ``env://`` adds, so one rank on ``env://`` would never meet the others). Gloo (and NCCL's bootstrap, and TensorPipe) bind to the interface
their variables name: on one machine, the loopback interface unless the user chose another.
"""
from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Optional

import torch.distributed as dist

from fastcore_train.parallel.loopback import choose_interfaces, loopback_address

#: The variables torch's transports read to choose the interface they bind to.
INTERFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def _local_world_size() -> Optional[int]:
    value = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(value) if value.isdigit() else None


def keep_transports_on_loopback(world_size: int) -> dict[str, str]:
    """Before ``init_process_group``: gloo/NCCL/TensorPipe bind to the loopback interface when every rank
    is on this machine, else to the interface of the route toward ``MASTER_ADDR``, unless the user set
    their variables; returns what was set."""
    return choose_interfaces(INTERFACE_VARIABLES, os.environ.get("MASTER_ADDR"), world_size, _local_world_size())


def loopback_store(rank: int, world_size: int, timeout: timedelta) -> Optional[dist.TCPStore]:
    """The job's store when ``MASTER_ADDR`` is a loopback address: rank 0 hosts it listening there only,
    the others connect to it. None where ``env://`` should make it (a non-loopback master, torchrun's
    agent store); every rank of a job decides the same, from the same variables."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True):
        return None
    address = loopback_address(os.environ.get("MASTER_ADDR"))
    port = os.environ.get("MASTER_PORT", "")
    if address is None or not port.isdigit():
        return None
    use_libuv = os.environ.get("USE_LIBUV", "1") == "1"
    if rank != 0:
        return dist.TCPStore(address, int(port), world_size, False, timeout, use_libuv=use_libuv)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, int(port)))
        listener.listen(max(128, world_size))
    except OSError as error:
        listener.close()
        raise RuntimeError(f"rank 0 could not listen on MASTER_ADDR:MASTER_PORT = {address}:{port} for the job's "
                           f"TCP store ({error}); another process may hold the port: choose a free MASTER_PORT.") from error
    return dist.TCPStore(address, int(port), world_size, True, timeout, multi_tenant=True,
                         master_listen_fd=listener.detach(), use_libuv=use_libuv)
