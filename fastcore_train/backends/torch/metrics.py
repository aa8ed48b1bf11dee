"""torch for metrics: element tensors, and torchmetrics metrics in the Evaluator.

torchmetrics reduces its own states (``sum``, ``cat``...); the adapter only hands it the driver's
``all_gather_object`` as its gather (``dist_sync_fn``) when each rank evaluated a share of the
data, and turns its gather off when every rank saw all of it (else the data would count once
per rank).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.distributed as dist

from fastcore_train.backends.torch.tensors import to_numeric
from fastcore_train.metrics.adapters import MetricAdapter

__all__ = ["is_tensor", "from_numpy", "move", "numel", "process_group_gather", "adapt", "TorchmetricsAdapter"]


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def from_numpy(array: np.ndarray, device: Any = None) -> torch.Tensor:
    return torch.tensor(array, device=device)  # a copy: the element never shares memory with the array


def move(value: torch.Tensor, device: Any) -> torch.Tensor:
    return value.to(device)


def numel(value: torch.Tensor) -> int:
    return value.numel()


def _gather(obj: Any) -> list:
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def process_group_gather() -> Optional[Callable[[Any], list]]:
    """``all_gather_object`` over torch's default process group when it has several ranks."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return _gather
    return None


def _tensor_gather(all_gather_object: Callable[[Any], list]) -> Callable[..., list]:
    """torchmetrics' ``dist_sync_fn(tensor, group)`` through ``all_gather_object`` (any shape per rank)."""
    def gather(tensor: torch.Tensor, group: Any = None) -> list:
        return [other.to(tensor.device) for other in all_gather_object(tensor.detach().cpu())]
    return gather


class TorchmetricsAdapter(MetricAdapter):
    def __init__(self, metric: Any) -> None:
        super().__init__(metric, metric.update)

    def to(self, device: Any) -> None:
        self.metric.to(device)

    def reset(self, gathering: bool) -> None:
        self.metric.reset()

    def get_metric(self, all_gather_object: Optional[Callable[[Any], list]]) -> Any:
        metric = self.metric
        # torchmetrics >= 0.11 asks distributed_available_fn whether to sync; older releases
        # (fastNLP 1.0's era) ask torch.distributed and honour _to_sync instead.
        switch = "distributed_available_fn" if hasattr(metric, "distributed_available_fn") else "_to_sync"
        saved = metric.dist_sync_fn, getattr(metric, switch)
        metric.dist_sync_fn = None if all_gather_object is None else _tensor_gather(all_gather_object)
        setattr(metric, switch, (lambda: all_gather_object is not None) if switch == "distributed_available_fn"
                else all_gather_object is not None)
        try:
            return to_numeric(metric.compute())
        finally:
            metric.dist_sync_fn = saved[0]
            setattr(metric, switch, saved[1])


def adapt(metric: Any) -> MetricAdapter:
    """The adapter of a torchmetrics metric (``Metric`` or ``MetricCollection``)."""
    if not (callable(getattr(metric, "update", None)) and callable(getattr(metric, "compute", None))):
        raise TypeError(f"{type(metric).__name__} is not a torchmetrics metric with update() and compute().")
    return TorchmetricsAdapter(metric)
