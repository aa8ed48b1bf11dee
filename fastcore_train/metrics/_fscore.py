"""F-beta, precision and recall from true-positive / false-negative / false-positive counts.

Shared by the classification and the span metrics, which differ only in what they count: both
derive from :class:`FPreRecBase`, which holds the settings, the count elements and the result.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Tuple

import numpy as np

from fastcore_train.metrics.metric import Metric

__all__ = ["F_TYPES", "COUNTS", "FPreRecBase", "check_f_type", "f_pre_rec", "f_pre_rec_result"]

#: The count elements, ``int64`` numpy arrays with one slot per label, summed over ranks.
COUNTS = ("tp", "fp", "fn")

F_TYPES = ("micro", "macro")


def check_f_type(f_type: str) -> str:
    """Fail early on an unknown averaging mode."""
    if f_type not in F_TYPES:
        raise ValueError(f"f_type must be 'micro' or 'macro', got {f_type!r}.")
    return f_type


def f_pre_rec(tp: float, fn: float, fp: float, beta: float = 1) -> Tuple[float, float, float]:
    """``(f_beta, precision, recall)``; a ratio with a zero denominator counts as 0."""
    pre = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    beta_square = beta ** 2
    denominator = beta_square * pre + rec
    f = (1 + beta_square) * pre * rec / denominator if denominator else 0.0
    return float(f), float(pre), float(rec)


def f_pre_rec_result(
    names: Sequence[Optional[str]],
    tp: np.ndarray,
    fn: np.ndarray,
    fp: np.ndarray,
    *,
    f_type: str,
    beta: float,
    only_gross: bool,
    excluded: Iterable[int] = (),
) -> dict:
    """Build the fastNLP-style result dict, every value rounded to 6 decimals.

    ``f``/``pre``/``rec`` are micro averages (from the summed counts) or macro averages (mean
    of the per-label scores). Labels never seen (all three counts zero) and ``excluded`` labels
    take no part. With ``only_gross=False`` the per-label ``f-<name>``, ``pre-<name>`` and
    ``rec-<name>`` are added for every seen label whose name is not empty.
    """
    skip = set(excluded)
    seen = [
        index for index in range(len(names))
        if index not in skip and (tp[index] or fn[index] or fp[index])
    ]
    result = {}
    per_label = []
    for index in seen:
        scores = f_pre_rec(int(tp[index]), int(fn[index]), int(fp[index]), beta)
        per_label.append(scores)
        if not only_gross and names[index]:
            for key, value in zip(("f", "pre", "rec"), scores):
                result[f"{key}-{names[index]}"] = value
    if f_type == "macro":
        if per_label:
            gross = tuple(sum(column) / len(per_label) for column in zip(*per_label))
        else:
            gross = (0.0, 0.0, 0.0)
    else:
        gross = f_pre_rec(
            sum(int(tp[i]) for i in seen), sum(int(fn[i]) for i in seen),
            sum(int(fp[i]) for i in seen), beta,
        )
    result.update(zip(("f", "pre", "rec"), gross))
    return {key: round(value, 6) for key, value in result.items()}


class FPreRecBase(Metric):
    """A metric of per-label ``tp``/``fp``/``fn`` counts scored as F-beta, precision and recall;
    subclasses count in ``update`` and name the labels in ``get_metric`` (see :meth:`_scores`)."""

    def __init__(self, only_gross: bool, f_type: str, beta: float, aggregate_when_get_metric: Optional[bool],
                 backend: Optional[str]) -> None:
        super().__init__(backend=backend, aggregate_when_get_metric=aggregate_when_get_metric)
        self.f_type = check_f_type(f_type)
        self.beta = beta
        self.only_gross = only_gross

    def _register_counts(self, size: int) -> None:
        """Declare the :data:`COUNTS` elements with ``size`` zero slots each."""
        for name in COUNTS:
            self.register_element(name, np.zeros(size, dtype=np.int64), aggregate_method="sum")

    def _scores(self, names: Sequence[Any], excluded: Iterable[int] = ()) -> dict:
        """:func:`f_pre_rec_result` of the counts, label ``i`` named ``names[i]``."""
        return f_pre_rec_result(names, self.tp.numpy(), self.fn.numpy(), self.fp.numpy(), f_type=self.f_type,
                                beta=self.beta, only_gross=self.only_gross, excluded=excluded)
