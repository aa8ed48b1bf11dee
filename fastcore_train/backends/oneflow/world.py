"""Which rank this process is, from the variables ``python -m oneflow.distributed.launch`` (or our
self-launch) sets, and those variables for ranks we start ourselves.

``import oneflow`` reads ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK`` once, when it
is imported, and builds its process-wide environment from them; a plain process gets
``WORLD_SIZE=1`` and ``RANK=-1`` written into ``os.environ`` by that import.
"""
from __future__ import annotations

from typing import Optional

from fastcore_train.launch import free_port
from fastcore_train.parallel.environment import ONEFLOW_LAUNCH, RankFacts

World = RankFacts  # the name the oneflow drivers use for a rank's facts


def world_from_environment() -> Optional[World]:
    """The rank facts of a launched rank; None in a plain process (no launcher, or world size 1)."""
    facts = ONEFLOW_LAUNCH.detect()
    return facts if facts is not None and facts.is_distributed else None


def launch_environments(world_size: int) -> list[dict[str, str]]:
    """OneFlow's launcher variables for each rank of a one-machine job we start ourselves."""
    port = free_port()
    return [ONEFLOW_LAUNCH.variables_for(rank, world_size, "127.0.0.1", port) for rank in range(world_size)]
