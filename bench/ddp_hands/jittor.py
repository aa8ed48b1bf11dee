"""Data parallel by hand in Jittor, its own way: the script runs under ``mpirun -np N``; a
``jittor.dataset.Dataset``'s ``batch_size`` is the global batch, each rank taking its slice, and
the optimizer averages gradients across ranks inside ``step(loss)`` (``jt.in_mpi``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import jittor as jt
import numpy as np
from jittor.dataset import Dataset

from bench.hands.jittor import MLP  # the overhead bench's MLP, any sizes

NAME = "jittor"
SPLIT = "batch-slices"  # under MPI rank r takes the r-th slice of every global batch
GLOBAL_BATCH = True


def version() -> str:
    return jt.__version__


def configure(threads: int) -> None:
    jt.flags.use_cuda = 0  # threads: OMP_NUM_THREADS, set before the import (as mpirun's re-exec does)


class DictDataset(Dataset):
    def __init__(self, x: Any, y: Any, batch_size: int) -> None:
        super().__init__()
        self.x, self.y = x, y
        self.set_attrs(total_len=len(x), batch_size=batch_size, shuffle=False)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {"x": self.x[index], "y": self.y[index]}


def _model(sizes: tuple[int, ...], seed: int):
    jt.sync_all()
    jt.set_seed(seed)  # every configuration starts from the same weights
    model = MLP(sizes)
    return model, jt.optim.SGD(model.parameters(), lr=0.01)


def init(world_size: int) -> int:
    if world_size > 1 and not (jt.in_mpi and jt.world_size == world_size):
        raise RuntimeError(f"jittor's hand-written data parallel runs under `mpirun -np {world_size}`; "
                           f"this process has in_mpi={jt.in_mpi}")
    return int(jt.rank) if jt.in_mpi else 0


def hand_parts(x, y, sizes, batch_size: int, world_size: int, seed: int = 0):
    """``batch_size`` per rank: the Dataset gets the global batch (jittor's MPI meaning)."""
    model, optimizer = _model(sizes, seed)
    return model, model, optimizer, DictDataset(x, y, batch_size * world_size)


def hand_epoch(model, optimizer, loader, limit: Optional[int], on_step: Callable[[], None]) -> int:
    cross_entropy = jt.nn.cross_entropy_loss
    model.train()
    done = 0
    for batch in loader:
        optimizer.step(cross_entropy(model(batch["x"]), batch["y"]))  # backward, all-reduce, update
        on_step()
        done += 1
        if done == limit:
            break
    return done


def trainer_parts(x, y, sizes, batch_size: int, world_size: int, seed: int = 0):
    """The Trainer's jittor driver reads a Dataset's ``batch_size`` as the global batch too."""
    model, optimizer = _model(sizes, seed)
    return model, optimizer, DictDataset(x, y, batch_size * world_size)


def barrier() -> None:
    jt.sync_all(True)
    if jt.in_mpi:
        jt.mpi.mpi_barrier()


def finish() -> None:
    jt.sync_all(True)  # jittor is lazy: run what is queued


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
