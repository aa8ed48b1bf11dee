"""Which rank this process is: from a launcher's environment (torchrun, ours) or an existing group."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import torch.distributed as dist


@dataclass(frozen=True)
class World:
    rank: int
    local_rank: int
    world_size: int


def world_from_environment() -> Optional[World]:
    """The rank facts torchrun (or our self-launch) put in the environment, if any."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return None
    world_size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return World(rank=rank, local_rank=local_rank, world_size=world_size)


def world_from_process_group() -> Optional[World]:
    """The rank facts of a process group the user initialised themselves."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    return World(rank=dist.get_rank(), local_rank=local_rank, world_size=dist.get_world_size())

