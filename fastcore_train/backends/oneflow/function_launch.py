"""How :func:`fastcore_train.notebook_launcher` starts oneflow ranks: oneflow's launcher variables
per rank, set before the rank's ``import oneflow`` (which fixes the rank for the process)."""
from __future__ import annotations

from typing import Optional

from fastcore_train.backends.oneflow.devices import DEVICES
from fastcore_train.backends.oneflow.world import launch_environments


def gpu_count() -> int:
    """GPUs this process sees (``num_processes=None`` starts one rank per GPU)."""
    return len(DEVICES.all_gpus())


def rank_variables(world_size: int) -> Optional[list[dict[str, str]]]:
    """oneflow.distributed.launch's variables for each rank of a one-machine job."""
    return launch_environments(world_size)

