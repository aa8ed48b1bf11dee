"""Reading the label vocabulary of a metric, whatever form the user passes it in.

Accepted forms: a dict ``label -> index``, a dict ``index -> label``, a list or tuple of labels
(position = index), or a vocabulary object with an ``idx2word`` mapping (fastNLP ``Vocabulary``
style, whose ``unknown`` / ``padding`` tokens are remembered as special, non-tag entries).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, FrozenSet, Mapping, Tuple

import numpy as np

__all__ = ["TagVocab", "read_tag_vocab", "DEFAULT_SPECIAL_TOKENS"]

#: Entries that are not real tags when the vocabulary does not name its own.
DEFAULT_SPECIAL_TOKENS = frozenset({"<unk>", "<pad>"})


@dataclass(frozen=True)
class TagVocab:
    """Labels indexed by class id, plus the special tokens that are not real tags."""

    labels: Tuple[str, ...]
    special: FrozenSet[str]

    def __len__(self) -> int:
        return len(self.labels)


def read_tag_vocab(tag_vocab: Any) -> TagVocab:
    """Normalise any accepted vocabulary form into a :class:`TagVocab`."""
    if hasattr(tag_vocab, "idx2word"):
        index_to_label = dict(tag_vocab.idx2word)
        special = {getattr(tag_vocab, attr, None) for attr in ("unknown", "padding")} - {None}
        return TagVocab(_dense_labels(index_to_label), frozenset(special))
    if isinstance(tag_vocab, Mapping):
        return TagVocab(_dense_labels(_index_to_label(tag_vocab)), DEFAULT_SPECIAL_TOKENS)
    if isinstance(tag_vocab, (list, tuple)):
        return TagVocab(tuple(str(label) for label in tag_vocab), DEFAULT_SPECIAL_TOKENS)
    raise TypeError(
        "tag_vocab must be a dict (label -> index or index -> label), a list/tuple of labels or a "
        f"vocabulary with an idx2word mapping, got {type(tag_vocab).__name__}."
    )


def _is_index(key: Any) -> bool:
    return isinstance(key, (int, np.integer)) and not isinstance(key, bool)


def _index_to_label(mapping: Mapping[Any, Any]) -> dict:
    """Turn a dict in either direction into ``index -> label``."""
    if all(_is_index(key) for key in mapping):
        return dict(mapping)
    if all(_is_index(value) for value in mapping.values()):
        if len(set(mapping.values())) != len(mapping):
            raise ValueError("A label -> index tag_vocab gives the same index to several labels.")
        return {index: label for label, index in mapping.items()}
    raise TypeError(
        "A dict tag_vocab must map labels to integer indices or integer indices to labels."
    )


def _dense_labels(index_to_label: Mapping[Any, Any]) -> Tuple[str, ...]:
    """Labels in index order; the indices must be exactly ``0 .. n-1``."""
    indices = sorted(int(index) for index in index_to_label)
    if indices != list(range(len(indices))):
        raise ValueError(f"tag_vocab indices must be 0 .. n-1 without gaps, got {indices}.")
    by_index = {int(index): label for index, label in index_to_label.items()}
    return tuple(str(by_index[index]) for index in indices)
