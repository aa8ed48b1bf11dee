"""``SpanFPreRecMetric``: span-level F-beta, precision and recall for sequence labelling.

Each sequence is decoded into labelled spans (BIO, BIOES, BMES or BMESO tags); a predicted span
is a true positive when the gold sequence has the same label over the same positions. Counts
are three ``int64`` numpy elements ``tp``, ``fp``, ``fn`` with one slot per span label, fixed by
the tag vocabulary, so they aggregate over ranks by a plain sum.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

import numpy as np

from fastcore_train.metrics._fscore import COUNTS, FPreRecBase
from fastcore_train.metrics._inputs import (as_class_ids, length_mask, predicted_ids, scored_classes,
                                            sequence_lengths)
from fastcore_train.metrics._span_decode import check_encoding, decode_spans, infer_encoding, span_labels
from fastcore_train.metrics._tag_vocab import read_tag_vocab

__all__ = ["SpanFPreRecMetric"]


class SpanFPreRecMetric(FPreRecBase):
    """Span F-beta / precision / recall, micro or macro averaged (fastNLP semantics).

    :param tag_vocab: tags by id (dict, list/tuple or ``idx2word`` vocabulary), e.g.
        ``["O", "B-PER", "I-PER"]``. ``<unk>`` / ``<pad>`` (or the vocabulary's own unknown and
        padding tokens) are treated as outside any span.
    :param encoding_type: ``"bio"``, ``"bioes"``, ``"bmes"`` or ``"bmeso"``; ``None`` infers it
        from the tag prefixes.
    :param ignore_labels: span labels (case-insensitive) left out of every count.
    :param only_gross: ``False`` adds ``f-<label>``, ``pre-<label>``, ``rec-<label>`` per label
        (labels in lower case, as in fastNLP).
    :param f_type: ``"micro"`` or ``"macro"`` (mean over the labels seen).
    :param beta: the beta of F-beta; 1 gives F1.
    """

    def __init__(
        self,
        tag_vocab: Any,
        encoding_type: Optional[str] = None,
        ignore_labels: Optional[Iterable[str]] = None,
        only_gross: bool = True,
        f_type: str = "micro",
        beta: float = 1,
        aggregate_when_get_metric: Optional[bool] = None,
        backend: Optional[str] = "auto",
    ) -> None:
        super().__init__(only_gross, f_type, beta, aggregate_when_get_metric, backend)
        self.tag_vocab = read_tag_vocab(tag_vocab)
        tags, special = self.tag_vocab.labels, self.tag_vocab.special
        if encoding_type is None:
            self.encoding_type = infer_encoding(tags, special)
        else:
            self.encoding_type = check_encoding(encoding_type, tags, special)
        self.span_labels = tuple(span_labels(tags, self.encoding_type, special))
        self._label_index = {label: index for index, label in enumerate(self.span_labels)}
        self.ignore_labels = frozenset(str(label).lower() for label in ignore_labels or ())
        unknown = sorted(self.ignore_labels - set(self.span_labels))
        if unknown:
            raise ValueError(f"ignore_labels {unknown} are not span labels of the tag vocabulary.")
        self._register_counts(len(self.span_labels))

    def update(self, pred: Any, target: Any, seq_len: Optional[Any] = None) -> None:
        """Count the spans of one batch.

        :param pred: ``[B, L]`` tag ids or ``[B, L, C]`` tag scores (argmax over ``C``).
        :param target: ``[B, L]`` gold tag ids.
        :param seq_len: ``[B]`` lengths; positions ``>= seq_len[i]`` are padding. ``None``
            uses the whole length ``L`` of every sequence.
        """
        target = self.to_numpy(target)
        if target.ndim != 2:
            raise ValueError(f"target must be [batch_size, max_len] tag ids, got shape {target.shape}.")
        scores = self.to_numpy(pred)
        pred = predicted_ids(scores, target)
        scored = scored_classes(scores, target)
        batch_size, max_len = target.shape
        if seq_len is None:
            lengths = np.full(batch_size, max_len, dtype=np.int64)
        else:
            lengths = sequence_lengths(seq_len, batch_size, max_len)
        mask = length_mask(lengths, batch_size, max_len)
        pred = as_class_ids(pred, "pred")
        target = as_class_ids(target, "target")
        self._check_ids(pred[mask], "pred")
        self._check_ids(target[mask], "target", scored)

        tags = self.tag_vocab.labels
        counts = {name: getattr(self, name).numpy().copy() for name in COUNTS}
        for pred_row, gold_row, length in zip(pred.tolist(), target.tolist(), lengths.tolist()):
            pred_spans = set(self._decode([tags[i] for i in pred_row[:length]]))
            gold_spans = set(self._decode([tags[i] for i in gold_row[:length]]))
            self._count(counts["tp"], pred_spans & gold_spans)
            self._count(counts["fp"], pred_spans - gold_spans)
            self._count(counts["fn"], gold_spans - pred_spans)
        for name, value in counts.items():
            setattr(self, name, value)

    def get_metric(self) -> dict:
        """``f``, ``pre``, ``rec`` (plus per-label keys if ``only_gross=False``), 6 decimals."""
        return self._scores(self.span_labels)

    def _decode(self, tags: list) -> list:
        return decode_spans(tags, self.encoding_type, self.tag_vocab.special, self.ignore_labels)

    def _count(self, counts: np.ndarray, spans: set) -> None:
        for label, _, _ in spans:
            counts[self._label_index[label]] += 1

    def _check_ids(self, ids: np.ndarray, what: str, scored: Optional[int] = None) -> None:
        """A tag id outside the vocabulary (or, for targets, beyond the tags ``pred`` scores) is an
        error naming it: it would otherwise be decoded wrongly or never predicted."""
        size = len(self.tag_vocab)
        if ids.size and (ids.min() < 0 or ids.max() >= size):
            bad = ids[(ids < 0) | (ids >= size)][0]
            raise ValueError(
                f"{what} holds tag id {bad}, outside the tag vocabulary of {size} tags "
                f"{list(self.tag_vocab.labels[:8])}{' ...' if size > 8 else ''} (ids 0 to {size - 1}). "
                "Check the data's tag ids against the tag_vocab the metric was given."
            )
        if scored is not None and scored < size and ids.size and ids.max() >= scored:
            bad = ids[ids >= scored][0]
            raise ValueError(
                f"{what} holds tag id {bad} ({self.tag_vocab.labels[bad]!r}), but pred scores only {scored} "
                f"tags (ids 0 to {scored - 1}), so it can never be predicted right. The model's output "
                f"size should match the tag_vocab ({size} tags)."
            )
