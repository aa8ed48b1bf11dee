"""Which rank this process is: from torchrun's variables (or our self-launch's, the same ones),
read by the shared :mod:`fastcore_train.parallel.environment`, or from a group the user set up."""
from __future__ import annotations

import os
from typing import Optional

import torch.distributed as dist

from fastcore_train.parallel.environment import TORCHRUN, RankFacts
from fastcore_train.parallel.slurm import launched_or_slurm


def world_from_environment() -> Optional[RankFacts]:
    """The rank facts torchrun (or our self-launch) put in the environment, else srun's (whose
    ``env://`` variables ``init_process_group`` reads)."""
    return launched_or_slurm(TORCHRUN)


def world_from_process_group() -> Optional[RankFacts]:
    """The rank facts of a process group the user initialised themselves."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    return RankFacts(rank=dist.get_rank(), local_rank=local_rank, world_size=dist.get_world_size())

