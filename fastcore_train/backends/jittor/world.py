"""Which rank this process is: jittor's own word on MPI (``jt.in_mpi``, ``jt.rank``), with mpirun's
variables (read by the shared :mod:`fastcore_train.parallel.environment`) for the details."""
from __future__ import annotations

from typing import Optional

import jittor as jt

from fastcore_train.parallel.environment import MPIRUN, RankFacts


def world_from_environment() -> Optional[RankFacts]:
    """The rank facts of an MPI rank of a job of several; None in a plain process."""
    if not (jt.in_mpi and jt.world_size > 1):
        return None
    return MPIRUN.detect() or RankFacts(rank=int(jt.rank), local_rank=int(jt.rank), world_size=int(jt.world_size),
                                        launcher=MPIRUN.name)
