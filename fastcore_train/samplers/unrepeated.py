"""Samplers for distributed evaluation: every sample is served exactly once over all ranks.

Unlike the training samplers nothing is padded or left out, so metrics are not skewed by
duplicates; ranks may therefore get one sample more or less than each other. Rank ``r`` of ``R``
serves ``order[r::R]`` (or, for ``UnrepeatedSequentialSampler(chunk_dist=True)``, one contiguous
chunk of the order).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
import warnings
from collections.abc import Iterator, Sized
from typing import Any, Optional, TypeVar

import numpy as np

from fastcore_train.samplers.base import SamplerUsageError, check_distributed, check_epoch, dataset_length
from fastcore_train.samplers.orders import Lengths, ShuffledOrder, check_seed, read_lengths, sorted_order

_U = TypeVar("_U", bound="UnrepeatedSampler")


class UnrepeatedSampler(ABC):
    """Base of the evaluation samplers: a per-epoch order split over ranks without padding."""

    def __init__(self, dataset: int | Sized, seed: int | None = None) -> None:
        self.num_samples = dataset_length(dataset)
        self.seed = seed
        self.epoch = 0
        self.num_replicas = 1
        self.rank = 0

    @abstractmethod
    def epoch_order(self, epoch: int) -> np.ndarray:
        """The order of all dataset indices for ``epoch``."""

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order from now on (only matters when shuffling)."""
        self.epoch = check_epoch(epoch)

    def set_distributed(self: _U, num_replicas: int, rank: int) -> _U:
        """Serve only ``rank``'s share. Returns ``self``."""
        self.num_replicas, self.rank = check_distributed(num_replicas, rank)
        return self

    def __iter__(self) -> Iterator[int]:
        order = np.asarray(self.epoch_order(self.epoch), dtype=np.int64)
        return iter(self._rank_part(order).tolist())

    def _rank_part(self, order: np.ndarray) -> np.ndarray:
        """This rank's part of the epoch order: every ``num_replicas``-th entry from ``rank``."""
        return order[self.rank::self.num_replicas]

    def __len__(self) -> int:
        return len(self._rank_part(np.arange(self.num_samples)))

    def _order_params(self) -> dict[str, Any]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Plain-data description (evaluation restarts from the beginning, so no position)."""
        return {"type": type(self).__name__, "seed": self.seed, "epoch": self.epoch,
                "dataset_length": self.num_samples, **self._order_params()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore seed, epoch and order parameters from :meth:`state_dict`."""
        if not isinstance(state, dict) or state.get("type") != type(self).__name__:
            found = state.get("type") if isinstance(state, dict) else type(state).__name__
            raise SamplerUsageError(f"cannot load a state of {found!r} into a {type(self).__name__}")
        if state.get("dataset_length") != self.num_samples:
            raise SamplerUsageError(f"the state was saved for a dataset of {state.get('dataset_length')} samples, "
                             f"this sampler has {self.num_samples}")
        self.epoch = check_epoch(state["epoch"])
        if self.seed is not None:
            self.seed = check_seed(state["seed"])
        if "shuffle" in state and hasattr(self, "shuffle"):
            self.shuffle = bool(state["shuffle"])


class UnrepeatedRandomSampler(ShuffledOrder, UnrepeatedSampler):
    """A permutation from ``(seed, epoch)`` when ``shuffle``, else the dataset order."""

    def __init__(self, dataset: int | Sized, shuffle: bool = False, seed: int = 0) -> None:
        super().__init__(dataset, check_seed(seed))
        self.shuffle = bool(shuffle)


class UnrepeatedSequentialSampler(UnrepeatedSampler):
    """Indices in dataset order.

    ``chunk_dist=True`` gives each rank one contiguous chunk (rank 0 of 2 over 10 samples:
    0-4, rank 1: 5-9; the last rank takes what does not divide evenly) instead of every
    ``num_replicas``-th index. ``length`` is accepted, as fastNLP 1.0 did, and not used: the order
    does not depend on sample lengths.
    """

    def __init__(self, dataset: int | Sized, chunk_dist: bool = False, length: Optional[Any] = None) -> None:
        super().__init__(dataset)
        self.chunk_dist = bool(chunk_dist)
        if length is not None:
            warnings.warn("UnrepeatedSequentialSampler ignores length=: it serves indices in dataset order "
                          "(UnrepeatedSortedSampler orders by length).", stacklevel=2)

    def epoch_order(self, epoch: int) -> np.ndarray:
        return np.arange(self.num_samples, dtype=np.int64)

    def _rank_part(self, order: np.ndarray) -> np.ndarray:
        if not self.chunk_dist:
            return super()._rank_part(order)
        chunk = len(order) // self.num_replicas
        end = len(order) if self.rank == self.num_replicas - 1 else chunk * (self.rank + 1)
        return order[chunk * self.rank:end]

    def _order_params(self) -> dict[str, Any]:
        return {"chunk_dist": self.chunk_dist}


class UnrepeatedSortedSampler(UnrepeatedSampler):
    """Indices by length, longest first (stable): each rank's batches need little padding."""

    def __init__(self, dataset: int | Sized, length: Lengths) -> None:
        super().__init__(dataset)
        self.lengths = read_lengths(length, self.num_samples)

    def epoch_order(self, epoch: int) -> np.ndarray:
        return sorted_order(self.lengths)
