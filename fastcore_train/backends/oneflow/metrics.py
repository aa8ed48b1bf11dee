"""oneflow for metrics: element tensors (``flow.Tensor``). OneFlow has no metric library to adapt."""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import oneflow as flow

from fastcore_train.backends.oneflow.world import OneflowCollectives
from fastcore_train.parallel.environment import RankFacts

__all__ = ["is_tensor", "from_numpy", "move", "numel", "process_group_gather"]


def is_tensor(value: Any) -> bool:
    return isinstance(value, flow.Tensor)


def from_numpy(array: np.ndarray, device: Any = None) -> flow.Tensor:
    return flow.tensor(np.array(array, copy=True), device=device)


def move(value: flow.Tensor, device: Any) -> flow.Tensor:
    return value.to(device)


def numel(value: flow.Tensor) -> int:
    return int(value.numel())


def _gather(obj: Any) -> list:
    facts = RankFacts(rank=flow.env.get_rank(), local_rank=flow.env.get_local_rank(),
                      world_size=flow.env.get_world_size())
    return OneflowCollectives(facts, flow.device("cpu")).all_gather_object(obj)


def process_group_gather() -> Optional[Callable[[Any], list]]:
    """``all_gather_object`` over oneflow's ranks when the process was launched with several."""
    return _gather if flow.env.get_world_size() > 1 else None
