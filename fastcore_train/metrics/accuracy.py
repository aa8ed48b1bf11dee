"""``Accuracy``: the share of positions whose predicted class equals the target class."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from fastcore_train.metrics._inputs import position_mask, predicted_ids
from fastcore_train.metrics.metric import Metric

__all__ = ["Accuracy"]


class Accuracy(Metric):
    """Classification accuracy, optionally over padded sequences.

    Elements: ``correct`` and ``total`` (both summed over ranks).
    """

    def __init__(self, aggregate_when_get_metric: bool = True) -> None:
        super().__init__(aggregate_when_get_metric=aggregate_when_get_metric)
        self.register_element("correct", 0, aggregate_method="sum")
        self.register_element("total", 0, aggregate_method="sum")

    def update(self, pred: Any, target: Any, seq_len: Optional[Any] = None) -> None:
        """Count one batch.

        :param pred: class ids shaped like ``target`` (``[B]``, ``[B, L]``, ...) or scores with
            one extra trailing class dimension (argmax is taken over it).
        :param target: gold class ids.
        :param seq_len: ``[B]`` lengths; when ``target`` is at least ``[B, L]``, positions
            ``>= seq_len[i]`` are padding and are not counted. Ignored for ``[B]`` targets.
        """
        target = self.to_numpy(target)
        pred = predicted_ids(self.to_numpy(pred), target)
        hits = pred == target
        mask = position_mask(seq_len, target.shape)
        if mask is None:
            self.correct += int(np.count_nonzero(hits))
            self.total += int(hits.size)
        else:
            self.correct += int(np.count_nonzero(hits & mask))
            self.total += int(np.count_nonzero(mask))

    def get_metric(self) -> dict:
        """``{"acc": correct / total}`` rounded to 6 decimals (0 before any position is counted)."""
        acc = self.correct / self.total if self.total else 0.0
        return {"acc": round(float(acc), 6)}
