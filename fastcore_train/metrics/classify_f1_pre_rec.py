"""``ClassifyFPreRecMetric``: per-class F-beta, precision and recall for classification.

Counts live in three ``int64`` numpy elements ``tp``, ``fp`` and ``fn`` indexed by class id:

* with a ``tag_vocab`` they have one slot per vocabulary entry from the start;
* without one they start empty and grow (zero-padded) to the largest class id seen.

Growing arrays may differ in length between ranks; :meth:`Metric.aggregate` right-pads ``sum``
elements with zeros before adding them, so the reduction stays exact.
"""
from __future__ import annotations

from typing import Any, Iterable, List, Optional, Set

import numpy as np

from fastcore_train.metrics._fscore import COUNTS, FPreRecBase
from fastcore_train.metrics._inputs import (as_class_ids, check_class_ids, position_mask, predicted_ids,
                                            scored_classes)
from fastcore_train.metrics._tag_vocab import TagVocab, read_tag_vocab

__all__ = ["ClassifyFPreRecMetric"]


class ClassifyFPreRecMetric(FPreRecBase):
    """F-beta / precision / recall over classes, micro or macro averaged (fastNLP semantics).

    :param tag_vocab: label names by class id (dict, list/tuple or ``idx2word`` vocabulary);
        ``None`` names classes by their id and lets the number of classes grow.
    :param ignore_labels: labels (names, or ids) whose tp/fp/fn are not counted; a sample of an
        ignored class predicted as another class still counts as a false positive of the latter.
    :param only_gross: ``False`` adds ``f-<label>``, ``pre-<label>``, ``rec-<label>`` per label.
    :param f_type: ``"micro"`` (scores from the summed counts) or ``"macro"`` (mean of the
        per-label scores over the labels seen).
    :param beta: the beta of F-beta; 1 gives F1.
    """

    def __init__(
        self,
        tag_vocab: Any = None,
        ignore_labels: Optional[Iterable[Any]] = None,
        only_gross: bool = True,
        f_type: str = "micro",
        beta: float = 1,
        aggregate_when_get_metric: Optional[bool] = None,
        backend: Optional[str] = "auto",
    ) -> None:
        super().__init__(only_gross, f_type, beta, aggregate_when_get_metric, backend)
        self.tag_vocab: Optional[TagVocab] = None if tag_vocab is None else read_tag_vocab(tag_vocab)
        self.ignore_labels = list(ignore_labels or ())
        self._ignored_ids = _resolve_ignored(self.ignore_labels, self.tag_vocab)
        self._register_counts(0 if self.tag_vocab is None else len(self.tag_vocab))

    def update(self, pred: Any, target: Any, seq_len: Optional[Any] = None) -> None:
        """Count one batch.

        :param pred: class ids shaped like ``target`` or scores with an extra trailing class axis.
        :param target: gold class ids, ``[B]`` or ``[B, L]``.
        :param seq_len: ``[B]`` lengths masking the padding of ``[B, L]`` targets.
        """
        target = self.to_numpy(target)
        scores = self.to_numpy(pred)
        pred = predicted_ids(scores, target)
        scored = scored_classes(scores, target)
        mask = position_mask(seq_len, target.shape)
        if mask is not None:
            pred, target = pred[mask], target[mask]
        pred = as_class_ids(np.ravel(pred), "pred")
        target = as_class_ids(np.ravel(target), "target")
        n_classes = self._fit_counts(pred, target, scored)

        hit = pred == target
        counts = {
            "tp": np.bincount(target[hit], minlength=n_classes),
            "fp": np.bincount(pred[~hit], minlength=n_classes),
            "fn": np.bincount(target[~hit], minlength=n_classes),
        }
        ignored = [index for index in self._ignored_ids if index < n_classes]
        for name, batch_counts in counts.items():
            batch_counts[ignored] = 0
            setattr(self, name, getattr(self, name).numpy() + batch_counts)

    def get_metric(self) -> dict:
        """``f``, ``pre``, ``rec`` (plus per-label keys if ``only_gross=False``), 6 decimals."""
        size = len(self.tp)
        names = self.tag_vocab.labels if self.tag_vocab is not None else [str(i) for i in range(size)]
        return self._scores(names, excluded=self._ignored_ids)

    # fastNLP 1.0's names of the counts (its tests read them).
    _tp = property(lambda self: self.tp)
    _fp = property(lambda self: self.fp)
    _fn = property(lambda self: self.fn)

    def _fit_counts(self, pred: np.ndarray, target: np.ndarray, scored: Optional[int] = None) -> int:
        """Check the ids and grow the count arrays to hold them; returns the number of slots.

        ``scored`` is how many classes ``pred`` scored (None when it gave ids): a target beyond
        them, or beyond the tag_vocab, is an error naming it, not a silent miss.
        """
        size = len(self.tp)
        if pred.size == 0 and target.size == 0:
            return size
        limit, whose = None, ""
        if self.tag_vocab is not None:
            limit, whose = size, f"the tag_vocab of {size} labels {_preview(self.tag_vocab.labels)}"
        check_class_ids(pred, "pred", limit, whose)
        if scored is not None and (limit is None or scored < limit):
            limit, whose = scored, f"the {scored} classes pred scores"
        check_class_ids(target, "target", limit, whose)
        needed = int(max(pred.max(initial=0), target.max(initial=0))) + 1
        if needed <= size:
            return size
        for name in COUNTS:
            setattr(self, name, np.pad(getattr(self, name).numpy(), (0, needed - size)))
        return needed


def _resolve_ignored(ignore_labels: List[Any], tag_vocab: Optional[TagVocab]) -> Set[int]:
    """Class ids of the ignored labels, given by name (with a vocabulary) or by id."""
    ids: Set[int] = set()
    for label in ignore_labels:
        if tag_vocab is not None and str(label) in tag_vocab.labels:
            ids.update(i for i, name in enumerate(tag_vocab.labels) if name == str(label))
            continue
        try:
            index = int(label)
        except (TypeError, ValueError):
            raise ValueError(f"Unknown label {label!r} in ignore_labels.") from None
        if index < 0 or (tag_vocab is not None and index >= len(tag_vocab)):
            raise ValueError(f"Unknown label {label!r} in ignore_labels.")
        ids.add(index)
    return ids


def _preview(labels: Any, shown: int = 8) -> str:
    listed = ", ".join(repr(label) for label in list(labels)[:shown])
    return f"[{listed}{', ...' if len(labels) > shown else ''}]"
