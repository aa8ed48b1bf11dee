"""Hand-written data-parallel loops, one module per framework, for ``bench/ddp.py``.

This package is framework-free; ``load(backend)`` imports the framework's module, which is the
same small interface for every backend (the bench's launching, timing and reporting are written
once in ``bench/ddp.py``):

* ``NAME``; ``version()``; ``SPLIT``: how the framework's own data-parallel loader divides the
  data over ranks (see :func:`hand_order`); ``GLOBAL_BATCH``: True where a loader's
  ``batch_size`` is the global batch (jittor under MPI);
* ``configure(threads)``: the framework's own compute-thread setting, as its data-parallel driver
  sets it;
* ``init(world_size) -> rank``: join the job's process group the framework's way (a no-op for 1);
* ``hand_parts(x, y, sizes, batch_size, world_size, seed) -> (model, wrapped, optimizer, loader)``:
  the framework's idiomatic data-parallel set-up (a wrapped model and a rank-aware loader), or a
  plain one for ``world_size == 1``;
* ``hand_epoch(wrapped, optimizer, loader, limit, on_step) -> steps``: one epoch (at most ``limit``
  steps) of the idiomatic loop, ``on_step()`` after each optimizer step;
* ``trainer_parts(x, y, sizes, batch_size, world_size, seed) -> (model, optimizer, loader)``: the
  same model, optimizer and data for ``fastcore_train.Trainer`` (a one-process loader: the Trainer
  splits it over ranks);
* ``barrier()``, ``finish()`` (wait for queued work: jittor is lazy, oneflow asynchronous) and
  ``weights(model)`` (numpy arrays);
* optionally ``close()``: leave the process group once the results are written.
"""
from __future__ import annotations

import importlib
from types import ModuleType

BACKENDS = ("torch", "paddle", "jittor", "oneflow")
#: How a framework's own loader gives rank ``r`` of ``W`` its samples.
#: ``"strided"``: every ``W``-th sample from ``r`` (torch's and oneflow's ``DistributedSampler``);
#: ``"batch-slices"``: the ``r``-th of ``W`` equal slices of each global batch (paddle's
#: ``DistributedBatchSampler``, jittor's ``Dataset`` under MPI).
SPLITS = ("strided", "batch-slices")


def load(backend: str) -> ModuleType:
    """The data-parallel hand-loop module for ``backend`` (imports that framework)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: choose one of {', '.join(BACKENDS)}.")
    return importlib.import_module(f"bench.ddp_hands.{backend}")


def make_data(n: int, sizes: tuple[int, ...], seed: int = 0):
    """``n`` seeded rows: float32 features of width ``sizes[0]`` and int64 labels below ``sizes[-1]``."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, sizes[0]), dtype=np.float32),
            rng.integers(0, sizes[-1], size=n, dtype=np.int64))


def hand_order(n: int, world_size: int, batch_size: int, split: str):
    """The order to store the data in for a hand loop whose loader splits it ``split``-wise, so that
    each rank trains on exactly the samples, in the same order, that the Trainer gives it.

    The Trainer's samplers give rank ``r`` the samples ``r, r + W, r + 2W, ...`` (``batch_size``
    per step), like torch's ``DistributedSampler``. A framework that instead hands rank ``r`` the
    ``r``-th slice of each global batch of ``W * batch_size`` gets the same samples when each global
    batch is stored rank by rank: slice ``r`` of global batch ``k`` holds the Trainer's step ``k``
    samples of rank ``r``. A permutation applied once, before anything is timed.
    """
    import numpy as np
    if split not in SPLITS:
        raise ValueError(f"split={split!r}: choose one of {', '.join(SPLITS)}.")
    order = np.arange(n)
    if split == "strided" or world_size == 1:
        return order
    per_step = world_size * batch_size
    if n % per_step:
        raise ValueError(f"{n} samples are not a whole number of global batches of {per_step}.")
    # (step, position in the rank's batch, rank) -> (step, rank, position)
    return order.reshape(n // per_step, batch_size, world_size).transpose(0, 2, 1).reshape(-1)
