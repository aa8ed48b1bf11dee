"""Turning a sequence of BIO / BIOES / BMES / BMESO tags into labelled spans.

Tags look like ``"B-PER"``: a one-letter prefix, a separator and a label (which may be empty,
as in ``"B"``). Labels are compared in lower case, as fastNLP does. Ill-formed continuations
(``I-X`` after ``O``, ``E-Y`` after ``B-X``, ...) open a new span rather than being dropped.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import AbstractSet, FrozenSet, Iterable, List, Sequence, Tuple

__all__ = ["ENCODINGS", "Span", "split_tag", "infer_encoding", "check_encoding", "span_labels",
           "decode_spans"]

#: ``(label, start, end)`` with ``end`` exclusive.
Span = Tuple[str, int, int]


@dataclass(frozen=True)
class _Scheme:
    """Prefix roles of one encoding; any other prefix (B, S, ...) opens a new span."""

    continues: FrozenSet[str]  # extend the open span ...
    extendable_after: FrozenSet[str]  # ... when the previous prefix is one of these, same label
    outside: FrozenSet[str]  # belong to no span


def _scheme(continues: str, extendable_after: str, outside: str) -> _Scheme:
    return _Scheme(frozenset(continues), frozenset(extendable_after),
                   frozenset(outside))


_SCHEMES = {
    "bio": _scheme(continues="i", extendable_after="bi", outside="o"),
    "bioes": _scheme(continues="ie", extendable_after="bi", outside="o"),
    "bmes": _scheme(continues="me", extendable_after="bm", outside=""),
    "bmeso": _scheme(continues="me", extendable_after="bm", outside="o"),
}

#: The supported encodings; each name is also its set of tag prefixes.
ENCODINGS = tuple(_SCHEMES)


def split_tag(tag: str) -> Tuple[str, str]:
    """``"B-PER"`` -> ``("b", "per")``."""
    tag = tag.lower()
    return tag[:1], tag[2:]


def _prefixes(tags: Iterable[str], special: AbstractSet[str]) -> set:
    return {split_tag(tag)[0] for tag in tags if tag not in special}


def infer_encoding(tags: Iterable[str], special: AbstractSet[str] = frozenset()) -> str:
    """The encoding whose prefixes are exactly those used by ``tags`` (special tokens aside)."""
    used = _prefixes(tags, special)
    for encoding in ENCODINGS:
        if used == set(encoding):
            return encoding
    raise ValueError(
        f"Cannot infer the span encoding from tag prefixes {sorted(used)}; pass encoding_type, "
        f"one of {', '.join(ENCODINGS)}."
    )


def check_encoding(encoding: str, tags: Iterable[str], special: AbstractSet[str] = frozenset()) -> str:
    """Validate a user-given encoding against the tags; returns it in lower case."""
    encoding = str(encoding).lower()
    if encoding not in _SCHEMES:
        raise ValueError(f"Unknown encoding_type {encoding!r}; expected one of {', '.join(ENCODINGS)}.")
    used = _prefixes(tags, special)
    foreign = sorted(used - set(encoding))
    if foreign:
        raise ValueError(
            f"Tag prefixes {foreign} are not part of encoding {encoding!r}; check encoding_type."
        )
    unused = sorted(set(encoding) - used)
    if unused:
        warnings.warn(
            f"Tag prefixes {unused} of encoding {encoding!r} do not occur in the tag vocabulary.",
            stacklevel=3,
        )
    return encoding


def span_labels(tags: Iterable[str], encoding: str, special: AbstractSet[str] = frozenset()) -> List[str]:
    """The distinct span labels the tags can produce, in order of first appearance."""
    outside = _SCHEMES[encoding].outside
    labels: List[str] = []
    for tag in tags:
        if tag in special:
            continue
        prefix, label = split_tag(tag)
        if prefix not in outside and label not in labels:
            labels.append(label)
    return labels


def decode_spans(
    tags: Sequence[str],
    encoding: str,
    special: AbstractSet[str] = frozenset(),
    ignore_labels: AbstractSet[str] = frozenset(),
) -> List[Span]:
    """Spans of one tag sequence; special tokens act as outside, ``ignore_labels`` are dropped."""
    scheme = _SCHEMES[encoding]
    spans: List[List] = []
    previous = None
    for position, tag in enumerate(tags):
        if tag in special:
            previous = None
            continue
        prefix, label = split_tag(tag)
        if prefix in scheme.outside:
            pass
        elif (prefix in scheme.continues and previous in scheme.extendable_after
              and spans and spans[-1][0] == label):
            spans[-1][2] = position + 1
        else:
            spans.append([label, position, position + 1])
        previous = prefix
    return [(label, start, end) for label, start, end in spans if label not in ignore_labels]
