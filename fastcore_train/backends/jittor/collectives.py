"""Python objects across MPI ranks with jittor's MPI binding: pickled, then broadcast as bytes.

``jt.mpi.broadcast(array, root)`` broadcasts a numpy array in place; gathering is one broadcast
per rank (first the payload's length, then the payload), which is plenty for the small objects
the Trainer exchanges (metric states, RNG states, flags).
"""
from __future__ import annotations

import pickle
from typing import Any

import jittor as jt
import numpy as np


def _mpi() -> Any:
    mpi = jt.mpi
    if mpi is None:
        raise RuntimeError("jittor's MPI support is not available in this process; run it under mpirun "
                           "(install MPI with: apt-get install -y openmpi-bin libopenmpi-dev).")
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
