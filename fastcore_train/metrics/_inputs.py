"""Checking and normalising the ``pred`` / ``target`` / ``seq_len`` arguments of metrics.

Shared by the metrics so that every one of them accepts the same shapes and fails with the same
clear messages.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from fastcore_train.utils.arrays import to_numpy

__all__ = ["predicted_ids", "scored_classes", "check_class_ids", "length_mask", "sequence_lengths",
           "position_mask", "as_class_ids"]


def predicted_ids(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Return ``pred`` as class ids shaped like ``target``.

    ``pred`` is either ids with ``target``'s shape or scores with one extra trailing class
    dimension, reduced with an argmax over the last axis.
    """
    if pred.shape == target.shape:
        return pred
    if pred.ndim == target.ndim + 1 and pred.shape[:-1] == target.shape:
        if pred.shape[-1] == 0:
            raise ValueError(f"pred has scores over zero classes (shape {pred.shape}).")
        return pred.argmax(axis=-1)
    raise ValueError(
        f"pred of shape {pred.shape} does not fit target of shape {target.shape}: pred must be "
        f"class ids of shape {target.shape} or scores of shape {target.shape + ('n_classes',)}."
    )


def scored_classes(pred: np.ndarray, target: np.ndarray) -> Optional[int]:
    """How many classes ``pred`` scores when it holds scores (one more axis than ``target``), else None."""
    return int(pred.shape[-1]) if pred.ndim == target.ndim + 1 else None


def _shown(value: Any) -> Any:
    return int(value) if float(value).is_integer() else value


def check_class_ids(ids: np.ndarray, what: str, n_classes: Optional[int] = None, classes: str = "") -> None:
    """Raise a ValueError naming the first bad id when ``ids`` (the counted positions only) hold a
    negative class id, or one ``>= n_classes`` (``classes`` says whose classes, for the message).

    A label outside the classes can never be predicted right; counting it would silently lower
    the score, so it is an error here, as an unknown label is in fastNLP.
    """
    if ids.size == 0 or not (np.issubdtype(ids.dtype, np.number) or ids.dtype == np.bool_):
        return
    flat = np.ravel(ids)
    negative = flat < 0
    if negative.any():
        bad = _shown(flat[negative][0])
        raise ValueError(
            f"{what} holds class id {bad}; class ids must be non-negative. If {bad} marks padding or "
            "ignored positions, leave them out (seq_len masks the padding of [batch, length] inputs).")
    if n_classes is not None:
        outside = flat >= n_classes
        if outside.any():
            bad = _shown(flat[outside][0])
            raise ValueError(
                f"{what} holds class id {bad}, out of range for {classes or f'{n_classes} classes'} "
                f"(ids 0 to {n_classes - 1}): it can never be predicted right. Check the labels of the "
                "data against the model's classes (or the metric's tag_vocab).")


def sequence_lengths(seq_len: Any, batch_size: int, max_len: int) -> np.ndarray:
    """``seq_len`` as ``int64`` lengths of shape ``[batch_size]``, clipped to ``[0, max_len]``."""
    lengths = to_numpy(seq_len)
    if lengths.shape != (batch_size,):
        raise ValueError(
            f"seq_len must have shape [batch_size] = ({batch_size},), got {lengths.shape}."
        )
    return np.clip(as_class_ids(lengths, "seq_len"), 0, max_len)


def length_mask(seq_len: Any, batch_size: int, max_len: int) -> np.ndarray:
    """Boolean ``[batch_size, max_len]`` mask, true at positions ``< seq_len[i]``."""
    lengths = sequence_lengths(seq_len, batch_size, max_len)
    return np.arange(max_len)[None, :] < lengths[:, None]


def position_mask(seq_len: Any, shape: Tuple[int, ...]) -> Optional[np.ndarray]:
    """Mask of the non-padding positions of a ``[B, L, ...]`` array, or ``None`` if all count.

    ``seq_len`` only matters when there is a length axis (at least two dimensions).
    """
    if seq_len is None or len(shape) < 2:
        return None
    mask = length_mask(seq_len, shape[0], shape[1])
    return np.broadcast_to(mask.reshape(mask.shape + (1,) * (len(shape) - 2)), shape)


def as_class_ids(values: np.ndarray, what: str) -> np.ndarray:
    """Return integer-valued ``values`` as ``int64``; fail clearly on fractional values."""
    if values.dtype == np.bool_ or np.issubdtype(values.dtype, np.integer):
        return values.astype(np.int64, copy=False)
    if np.issubdtype(values.dtype, np.floating) and np.all(np.mod(values, 1) == 0):
        return values.astype(np.int64)
    raise ValueError(f"{what} must hold integer ids, got dtype {values.dtype}.")
