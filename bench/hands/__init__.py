"""Hand-written training loops, one module per framework, for ``bench/overhead.py``.

Each module is the same small interface (the bench reaches it through :func:`load`):

* ``NAME``, ``TRAINER_KWARGS`` (``driver``/``device`` for the ``Trainer``), ``version()``;
* ``configure(threads)``: the framework's own thread setting;
* ``build_task(batches, seed)``: ``(loader, model_and_optimizer)`` factories: a fresh loader of
  the framework's own kind over the same seeded data, and a fresh model (same initial weights every
  call) with its SGD optimizer;
* ``hand_epoch(loader, model, optimizer)``: one epoch of the framework's idiomatic loop;
* ``finish()``: wait for queued work (oneflow runs ops asynchronously, jittor lazily), so a timed
  round includes all of its compute;
* ``weights(model)``: the parameters as numpy arrays, to check the race was fair.
"""
from __future__ import annotations

import importlib
from types import ModuleType

BACKENDS = ("torch", "paddle", "jittor", "oneflow")
SIZES = (64, 256, 256, 10)
BATCH_SIZE = 32
LR = 0.01


def load(backend: str) -> ModuleType:
    """The hand-loop module for ``backend`` (imports that framework)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: choose one of {', '.join(BACKENDS)}.")
    return importlib.import_module(f"bench.hands.{backend}")


def make_data(batches: int, seed: int):
    """``batches * BATCH_SIZE`` seeded rows: float32 features and int64 class labels (numpy)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    n = batches * BATCH_SIZE
    return (rng.standard_normal((n, SIZES[0]), dtype=np.float32),
            rng.integers(0, SIZES[-1], size=n, dtype=np.int64))
