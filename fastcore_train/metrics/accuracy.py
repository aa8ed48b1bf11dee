"""``Accuracy``: the share of positions whose predicted class equals the target class."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from fastcore_train.metrics._inputs import check_class_ids, position_mask, predicted_ids, scored_classes
from fastcore_train.metrics.metric import Metric

__all__ = ["Accuracy"]


class Accuracy(Metric):
    """Classification accuracy, optionally over padded sequences.

    Elements: ``correct`` and ``total`` (both summed over ranks). ``backend`` and
    ``aggregate_when_get_metric`` are :class:`Metric`'s.
    """

    def __init__(self, backend: Optional[str] = "auto", aggregate_when_get_metric: Optional[bool] = None) -> None:
        super().__init__(backend=backend, aggregate_when_get_metric=aggregate_when_get_metric)
        self.register_element("correct", 0, aggregate_method="sum")
        self.register_element("total", 0, aggregate_method="sum")

    def update(self, pred: Any, target: Any, seq_len: Optional[Any] = None) -> None:
        """Count one batch.

        :param pred: class ids shaped like ``target`` (``[B]``, ``[B, L]``, ...) or scores with
            one extra trailing class dimension (argmax is taken over it).
        :param target: gold class ids; a negative id, or one beyond the classes ``pred`` scores, at
            a counted position is an error (it could never be predicted right).
        :param seq_len: ``[B]`` lengths; when ``target`` is at least ``[B, L]``, positions
            ``>= seq_len[i]`` are padding and are not counted. Ignored for ``[B]`` targets.
        """
        target = self.to_numpy(target)
        scores = self.to_numpy(pred)
        pred = predicted_ids(scores, target)
        hits = pred == target
        mask = position_mask(seq_len, target.shape)
        n_classes = scored_classes(scores, target)
        check_class_ids(target if mask is None else target[mask], "target", n_classes,
                        f"the {n_classes} classes pred scores")
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
