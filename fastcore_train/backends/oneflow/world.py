"""Which rank this process is, from the variables ``python -m oneflow.distributed.launch`` (or our
self-launch) sets, and those variables for ranks we start ourselves.

``import oneflow`` reads ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK`` once, when it
is imported, and builds its process-wide environment from them; a plain process gets
``WORLD_SIZE=1`` and ``RANK=-1`` written into ``os.environ`` by that import.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from fastcore_train.launch import free_port


@dataclass(frozen=True)
class World:
    rank: int
    local_rank: int
    world_size: int


def world_from_environment() -> Optional[World]:
    """The rank facts of a launched rank; None in a plain process (no launcher, or world size 1)."""
    try:
        rank = int(os.environ.get("RANK", "-1"))
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return None
    if rank < 0 or world_size < 2:
        return None
    return World(rank=rank, local_rank=int(os.environ.get("LOCAL_RANK", rank)), world_size=world_size)


def launch_environments(world_size: int) -> list[dict[str, str]]:
    """OneFlow's launcher variables for each rank of a one-machine job we start ourselves."""
    shared = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(world_size),
              "LOCAL_WORLD_SIZE": str(world_size)}
    return [{**shared, "RANK": str(rank), "LOCAL_RANK": str(rank)} for rank in range(world_size)]
