"""jittor for metrics: element tensors (``jt.Var``). Jittor has no metric library to adapt.

Jittor keeps every variable on the process's one device, so ``move`` changes nothing; a scalar
becomes a one-value ``Var`` of shape ``[1]`` (jittor's way).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import jittor as jt
import numpy as np

from fastcore_train.backends.jittor.world import all_gather_object

__all__ = ["is_tensor", "from_numpy", "move", "numel", "process_group_gather"]


def is_tensor(value: Any) -> bool:
    return isinstance(value, jt.Var)


def from_numpy(array: np.ndarray, device: Any = None) -> jt.Var:
    return jt.array(np.array(array, copy=True))


def move(value: jt.Var, device: Any) -> jt.Var:
    return value


def numel(value: jt.Var) -> int:
    return int(value.numel())


def process_group_gather() -> Optional[Callable[[Any], list]]:
    """``all_gather_object`` over MPI when this process runs under mpirun with several ranks."""
    if jt.in_mpi and jt.world_size > 1:
        return all_gather_object
    return None
