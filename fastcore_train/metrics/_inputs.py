"""Checking and normalising the ``pred`` / ``target`` / ``seq_len`` arguments of metrics.

Shared by the metrics so that every one of them accepts the same shapes and fails with the same
clear messages.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from fastcore_train.utils.arrays import to_numpy

__all__ = ["predicted_ids", "length_mask", "sequence_lengths", "position_mask", "as_class_ids"]


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
