"""How :func:`fastcore_train.notebook_launcher` starts paddle ranks: paddle's launcher variables
per rank, gloo on CPU, nccl with one GPU per rank when there are enough GPUs."""
from __future__ import annotations

from typing import Optional

from fastcore_train.backends.paddle.devices import gpu_count as visible_gpus
from fastcore_train.backends.paddle.world import launch_environments


def gpu_count() -> int:
    """GPUs this process sees (``num_processes=None`` starts one rank per GPU)."""
    return visible_gpus()


def rank_variables(world_size: int) -> Optional[list[dict[str, str]]]:
    """paddle.distributed.launch's variables for each rank of a one-machine job."""
    if gpu_count() >= world_size:
        return launch_environments(world_size, "nccl", list(range(world_size)))
    return launch_environments(world_size, "gloo")
