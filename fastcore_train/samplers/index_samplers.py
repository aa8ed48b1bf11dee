"""Resumable index samplers: random (or sequential) and length-sorted orders."""
from __future__ import annotations

from collections.abc import Sized
from typing import Any

import numpy as np

from fastcore_train.samplers.base import ReproducibleSampler
from fastcore_train.samplers.orders import Lengths, ShuffledOrder, check_seed, read_lengths, sorted_order


class RandomSampler(ShuffledOrder, ReproducibleSampler):
    """A fresh permutation of the dataset every epoch, from ``(seed, epoch)`` only.

    ``shuffle=False`` serves the indices in order (and still resumes mid-epoch).
    """

    def __init__(self, dataset: int | Sized, shuffle: bool = True, seed: int = 0) -> None:
        super().__init__(dataset, check_seed(seed))
        self.shuffle = bool(shuffle)

    def _load_order_params(self, state: dict[str, Any]) -> None:
        self.seed = check_seed(state["seed"])
        self.shuffle = bool(state["shuffle"])


class SequentialSampler(ReproducibleSampler):
    """Indices ``0, 1, ..., n - 1`` every epoch."""

    def __init__(self, dataset: int | Sized) -> None:
        super().__init__(dataset, seed=None)

    def epoch_order(self, epoch: int) -> np.ndarray:
        return np.arange(self.num_samples, dtype=np.int64)


class SortedSampler(ReproducibleSampler):
    """Indices sorted by sample length, longest first (stable), the same every epoch.

    ``length`` is one number per sample or ``callable(index) -> int``, evaluated once here.
    Useful to evaluate with little padding, or to fail fast on the longest samples. The lengths
    are read once, so its epochs keep the dataset's length at construction.
    """

    follows_dataset_length = False

    def __init__(self, dataset: int | Sized, length: Lengths) -> None:
        super().__init__(dataset, seed=None)
        self.lengths = read_lengths(length, self.num_samples)

    def epoch_order(self, epoch: int) -> np.ndarray:
        return sorted_order(self.lengths)
