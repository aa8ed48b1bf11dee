"""How :func:`fastcore_train.notebook_launcher` starts torch ranks: torchrun's variables per rank
(each rank then sets up gloo on CPU, nccl on GPUs, as under torchrun)."""
from __future__ import annotations

from typing import Optional

from fastcore_train.backends.torch.devices import DEVICES
from fastcore_train.parallel.environment import TORCHRUN
from fastcore_train.parallel.launch import free_port


def gpu_count() -> int:
    """GPUs this process sees (``num_processes=None`` starts one rank per GPU); CUDA is not initialised."""
    return len(DEVICES.all_gpus())


def rank_variables(world_size: int) -> Optional[list[dict[str, str]]]:
    """torchrun's variables for each rank of a one-machine job."""
    port = free_port()
    return [TORCHRUN.variables_for(rank, world_size, "127.0.0.1", port) for rank in range(world_size)]
