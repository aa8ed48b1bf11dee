"""How :func:`fastcore_train.notebook_launcher` starts jittor ranks: under ``mpirun`` (jittor's
data parallel is MPI; its rank comes from Open MPI), so no per-rank variables."""
from __future__ import annotations

from typing import Optional


def gpu_count() -> int:
    """Jittor data parallel over GPUs is not started from a function here: ``num_processes=None`` means one."""
    return 0


def rank_variables(world_size: int) -> Optional[list[dict[str, str]]]:
    """None: the ranks run under ``mpirun -np world_size``."""
    return None
