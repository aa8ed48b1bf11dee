"""paddle for metrics: element tensors, and ``paddle.metric`` metrics in the Evaluator.

A ``paddle.metric.Metric`` turns a batch into per-sample results with ``compute(...)`` and
accumulates them with ``update(...)``; its state is free-form numpy. To combine ranks exactly,
whatever the metric, the adapter keeps this rank's ``compute`` results when a gather will follow,
gathers every rank's, and replays them, in rank order, into the reset metric before
``accumulate()``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import paddle
import paddle.distributed as dist

from fastcore_train.metrics.adapters import MetricAdapter
from fastcore_train.utils.arrays import to_numpy

__all__ = ["is_tensor", "from_numpy", "move", "numel", "process_group_gather", "adapt", "PaddleMetricAdapter"]


def is_tensor(value: Any) -> bool:
    return isinstance(value, paddle.Tensor)


def from_numpy(array: np.ndarray, device: Any = None) -> paddle.Tensor:
    tensor = paddle.to_tensor(np.array(array, copy=True))
    return tensor if device is None else tensor.to(device)


def move(value: paddle.Tensor, device: Any) -> paddle.Tensor:
    return value.to(device)


def numel(value: paddle.Tensor) -> int:
    return int(value.size)


def _gather(obj: Any) -> list:
    gathered: list = []
    dist.all_gather_object(gathered, obj)
    return gathered


def process_group_gather() -> Optional[Callable[[Any], list]]:
    """``all_gather_object`` over paddle's default group when it has several ranks."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        return _gather
    return None


def _numbers(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_numbers(item) for item in value]
    if isinstance(value, paddle.Tensor):
        value = value.numpy()
    return value.item() if isinstance(value, (np.ndarray, np.generic)) and np.size(value) == 1 else value


class PaddleMetricAdapter(MetricAdapter):
    def __init__(self, metric: Any) -> None:
        super().__init__(metric, self._compute_and_update, signature_fn=metric.compute)
        self._kept: Optional[list] = None

    def _compute_and_update(self, *args: Any, **kwargs: Any) -> None:
        results = self.metric.compute(*args, **kwargs)
        results = [to_numpy(item) for item in (results if isinstance(results, (list, tuple)) else [results])]
        if self._kept is not None:
            self._kept.append(results)
        self.metric.update(*results)

    def reset(self, gathering: bool) -> None:
        self.metric.reset()
        self._kept = [] if gathering else None

    def get_metric(self, all_gather_object: Optional[Callable[[Any], list]]) -> Any:
        if all_gather_object is not None:
            if self._kept is None:
                raise RuntimeError("The evaluation began without reset(gathering=True); nothing was kept to gather.")
            every_rank = all_gather_object(self._kept)
            self.metric.reset()
            for kept in every_rank:
                for results in kept:
                    self.metric.update(*results)
        value = _numbers(self.metric.accumulate())
        names = self.metric.name()
        if isinstance(value, list) and isinstance(names, (list, tuple)) and len(names) == len(value):
            return dict(zip(names, value))
        return value


def adapt(metric: Any) -> MetricAdapter:
    """The adapter of a ``paddle.metric.Metric`` (compute, update, accumulate, reset, name)."""
    missing = [name for name in ("compute", "update", "accumulate", "reset", "name")
               if not callable(getattr(metric, name, None))]
    if missing:
        raise TypeError(f"{type(metric).__name__} lacks {', '.join(missing)} of a paddle.metric.Metric.")
    return PaddleMetricAdapter(metric)
