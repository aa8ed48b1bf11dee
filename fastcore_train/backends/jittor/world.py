"""Which rank this process is and its collectives: jittor's own word on MPI (``jt.in_mpi``,
``jt.rank``), with mpirun's variables (read by the shared
:mod:`fastcore_train.parallel.environment`) for the details.

Python objects cross MPI ranks with jittor's MPI binding: pickled, then broadcast as bytes.
``jt.mpi.broadcast(array, root)`` broadcasts a numpy array in place; gathering is one broadcast
per rank (first the payload's length, then the payload), which is plenty for the small objects
the Trainer exchanges (metric states, RNG states, flags).
"""
from __future__ import annotations

import pickle
from typing import Any, Optional, Sequence

import jittor as jt
import numpy as np

from fastcore_train.drivers.collectives import Collectives
from fastcore_train.parallel.environment import MPIRUN, RankFacts
from fastcore_train.parallel.launcher import MPI_INSTALL_HINT
from fastcore_train.parallel.slurm import refuse_slurm_only

#: Why srun alone cannot start jittor's ranks, and what to run instead.
SLURM_REMEDY = ("jittor joins an MPI job only when Open MPI's mpirun started it (it looks for OMPI_COMM_WORLD_SIZE "
                "when imported; srun, even with --mpi=pmix, does not set it). In the job script run one mpirun "
                "inside the allocation instead of srun: `mpirun -np $SLURM_NTASKS python train.py` (see "
                "docs/multinode.md, SLURM).")


def world_from_environment() -> Optional[RankFacts]:
    """The rank facts of an MPI rank of a job of several; None in a plain process. A task srun
    started as one of several is an error (jittor cannot take its rank from SLURM)."""
    if not (jt.in_mpi and jt.world_size > 1):
        refuse_slurm_only("jittor", SLURM_REMEDY)
        return None
    return MPIRUN.detect() or RankFacts(rank=int(jt.rank), local_rank=int(jt.rank), world_size=int(jt.world_size),
                                        launcher=MPIRUN.name)


def _mpi() -> Any:
    mpi = jt.mpi
    if mpi is None:
        raise RuntimeError("jittor's MPI support is not available in this process; run it under mpirun "
                           f"(no MPI installed? {MPI_INSTALL_HINT}).")
    return mpi


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank."""
    mpi = _mpi()
    payload = pickle.dumps(obj) if mpi.world_rank() == src else b""
    size = np.array([len(payload)], dtype=np.int64)
    mpi.broadcast(size, src)
    buffer = np.frombuffer(payload, dtype=np.uint8).copy() if mpi.world_rank() == src else \
        np.empty(int(size[0]), dtype=np.uint8)
    if buffer.size:
        mpi.broadcast(buffer, src)
    return obj if mpi.world_rank() == src else pickle.loads(buffer.tobytes())


def all_gather_object(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order."""
    mpi = _mpi()
    return [broadcast_object(obj, rank) for rank in range(mpi.world_size())]


def barrier() -> None:
    """Wait for every rank."""
    _mpi().mpi_barrier()


class JittorCollectives(Collectives):
    """``driver.comm`` of an MPI rank: rank facts from jittor, collectives through its MPI binding.

    Before the job is started (rank 0 about to re-run itself under mpirun) it is rank 0 of
    ``launch_world_size``.
    """

    def __init__(self, launch_world_size: Optional[int] = None) -> None:
        if jt.in_mpi:
            facts = RankFacts(rank=int(jt.rank), local_rank=int(jt.mpi.local_rank()), world_size=int(jt.world_size))
        else:
            facts = RankFacts(rank=0, local_rank=0, world_size=launch_world_size or 1)
        super().__init__(facts, distributed=True)

    def barrier(self) -> None:
        jt.sync_all()
        barrier()

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        return broadcast_object(obj, src)

    def all_gather_object(self, obj: Any) -> list[Any]:
        return all_gather_object(obj)

    def sum_over_ranks(self, values: Sequence[int]) -> list[int]:
        """Each integer summed over the ranks: one small broadcast per rank (jittor's MPI binding
        broadcasts numpy arrays in place and has no all-reduce of them)."""
        mpi = _mpi()
        mine = np.array([int(value) for value in values], dtype=np.int64)
        total = np.zeros_like(mine)
        for rank in range(mpi.world_size()):
            buffer = mine.copy() if rank == mpi.world_rank() else np.empty_like(mine)
            mpi.broadcast(buffer, rank)
            total += buffer
        return [int(value) for value in total]
