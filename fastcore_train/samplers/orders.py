"""Deterministic per-epoch orders of dataset indices, built from (seed, epoch, parameters) only.

Every sampler builds its global order with these functions. They never touch a global random
state: each call draws from ``np.random.default_rng([seed, epoch])``, so the same arguments give
the same order in any process, before or after a resume.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional, Union

import numpy as np

from fastcore_train.samplers._progress import check_epoch

#: Per-sample lengths: a sequence/array with one number per sample, or ``callable(index) -> int``.
Lengths = Union[Sequence[float], np.ndarray, Callable[[int], float]]


def check_seed(seed: int) -> int:
    """Return ``seed`` as a python int; it must be a non-negative integer (numpy seeding rule)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """A generator that depends on (seed, epoch) only."""
    return np.random.default_rng([seed, epoch])


def random_order(num_samples: int, seed: int, epoch: int, shuffle: bool = True) -> np.ndarray:
    """A permutation of ``range(num_samples)`` for this epoch, or the identity when not shuffling."""
    if not shuffle:
        return np.arange(num_samples, dtype=np.int64)
    return epoch_rng(seed, epoch).permutation(num_samples).astype(np.int64)


class ShuffledOrder:
    """The ``epoch_order`` of a sampler with a ``shuffle`` flag: :func:`random_order` of its
    ``num_samples`` and ``seed`` (shared by the reproducible and the unrepeated samplers)."""

    num_samples: int
    seed: int
    shuffle: bool

    def epoch_order(self, epoch: int) -> np.ndarray:
        return random_order(self.num_samples, self.seed, check_epoch(epoch), self.shuffle)

    def _order_params(self) -> dict[str, bool]:
        return {"shuffle": self.shuffle}


def read_lengths(length: Lengths, num_samples: int) -> np.ndarray:
    """Per-sample lengths as a 1-D numeric array of ``num_samples`` entries (evaluated once)."""
    if callable(length):
        values = np.asarray([length(i) for i in range(num_samples)])
    else:
        values = np.asarray(length)
    if values.ndim != 1 or values.shape[0] != num_samples:
        raise ValueError(f"length must give one value per sample ({num_samples}), got shape {values.shape}")
    if num_samples and not np.issubdtype(values.dtype, np.number):
        raise TypeError(f"lengths must be numbers, got dtype {values.dtype}")
    return values.astype(np.int64) if np.issubdtype(values.dtype, np.integer) else values.astype(np.float64)


def sorted_order(lengths: np.ndarray) -> np.ndarray:
    """Indices sorted by length, longest first; equal lengths keep index order (stable)."""
    return np.argsort(-lengths, kind="stable").astype(np.int64)


def bucketed_order(lengths: np.ndarray, seed: int, epoch: int, shuffle: bool, global_batch: int,
                   num_batch_per_bucket: int, indices: Optional[np.ndarray] = None,
                   salt: int = 0) -> np.ndarray:
    """An order whose consecutive runs of ``global_batch`` entries hold samples of near-equal length.

    Sort ``indices`` (default: every sample) by length, longest first, and cut that into buckets
    of ``global_batch * num_batch_per_bucket`` samples of neighbouring lengths. Without
    shuffling that sorted order is the result. With shuffling each bucket is permuted and cut
    into global batches, and the global batches are permuted; a short global batch (only the
    very last one can be) stays last, so every other one starts at a multiple of
    ``global_batch`` and the rank split keeps lining up with them. This is fastNLP 1.0's
    grouping, over the whole world's batches at once. ``salt`` varies the draws (a resume that
    re-buckets the rest of an epoch uses its offset).
    """
    if indices is None:
        indices = np.arange(len(lengths), dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    ordered = indices[np.argsort(-lengths[indices], kind="stable")]
    if not shuffle or not len(ordered):
        return ordered
    rng = np.random.default_rng([seed, epoch, salt])
    bucket = global_batch * num_batch_per_bucket
    full: list[np.ndarray] = []
    short: list[np.ndarray] = []
    for start in range(0, len(ordered), bucket):
        part = rng.permutation(ordered[start:start + bucket])
        for i in range(0, len(part), global_batch):
            chunk = part[i:i + global_batch]
            chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
            (full if len(chunk) == global_batch else short).append(chunk)
    full = [full[i] for i in rng.permutation(len(full))]
    return np.concatenate(full + short)
