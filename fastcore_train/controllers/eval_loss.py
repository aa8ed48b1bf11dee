"""The evaluation loss: the mean of the ``loss`` that evaluation outputs hold, as transformers' ``eval_loss``.

When ``evaluate_step`` (or the ``evaluate_fn``) returns a ``loss``, the Evaluator reports its mean
over the samples evaluated as the result ``loss`` (``loss#<dataloader name>`` with named
dataloaders), which a ``monitor`` can name (``monitor="loss", larger_better=False``). A one-number
loss is taken as its batch's mean and weighted by the batch's size, so a short last batch counts
for what it holds; a per-sample loss (one value per sample) counts each value once. Ranks that
evaluated shares add their sums and counts, so 2 ranks give what one process gives.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

import numpy as np

__all__ = ["EvalLoss", "batch_size_of", "mean_loss"]

#: The outputs' entry read as the evaluation loss (the name train steps already use).
LOSS_KEY = "loss"


def batch_size_of(*sources: Any) -> int:
    """The first dimension of the first array-like entry found in ``sources`` (the batch, then the
    outputs), or 1 when none has one (the loss then counts once per batch)."""
    stack = list(reversed(sources))
    while stack:
        value = stack.pop()
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(value, Mapping):
            stack.extend(reversed([item for key, item in value.items() if key != LOSS_KEY]))
        elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            stack.extend(reversed(list(value)))
    return 1


class EvalLoss:
    """Sum and count of one dataloader's evaluation losses on this rank."""

    def __init__(self, to_numpy: Callable[[Any], Any]) -> None:
        self.to_numpy = to_numpy
        self.total = 0.0
        self.count = 0

    def reset(self) -> None:
        self.total, self.count = 0.0, 0

    def add(self, loss: Any, batch: Any, outputs: Mapping[str, Any]) -> None:
        """Count one batch's ``loss`` (a batch mean, or one value per sample)."""
        values = np.asarray(self.to_numpy(loss), dtype=np.float64)
        if values.size == 1:
            size = batch_size_of(batch, outputs)
            self.total += float(values.reshape(())) * size
            self.count += size
        else:
            self.total += float(values.sum())
            self.count += int(values.size)

    def share(self) -> tuple[float, int]:
        return self.total, self.count


def mean_loss(shares: Sequence[tuple[float, int]]) -> float | None:
    """The mean over every rank's ``(sum, count)``; None when no rank saw a loss."""
    count = sum(share[1] for share in shares)
    if count == 0:
        return None
    return sum(share[0] for share in shares) / count
