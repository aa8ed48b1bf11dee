"""Resumable batch samplers: what a data loader's ``batch_sampler`` gets.

Each one yields this rank's batches (lists of python ints) and can save, mid-epoch, how much of
the epoch the training loop really used, even when the loader prefetched more batches.
"""
from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import Any

import numpy as np

from fastcore_train.samplers.base import (
    ReproducibleBatchSampler,
    ReproducibleSampler,
    dataset_length,
)
from fastcore_train.samplers.orders import Lengths, bucketed_order, check_seed, random_order, read_lengths


class RandomBatchSampler(ReproducibleBatchSampler):
    """Batches of a fresh permutation every epoch, from ``(seed, epoch)`` only."""

    def __init__(self, dataset: int | Sized, batch_size: int, shuffle: bool = True,
                 drop_last: bool = False, seed: int = 0) -> None:
        super().__init__(dataset_length(dataset), batch_size, drop_last)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(seed)

    def _build_order(self, epoch: int, batch_size: int, num_replicas: int) -> np.ndarray:
        return random_order(self.num_samples, self.seed, epoch, self.shuffle)

    def _order_params(self) -> dict[str, Any]:
        return {"seed": self.seed, "shuffle": self.shuffle}

    def _load_order_params(self, state: dict[str, Any]) -> None:
        self.seed = check_seed(state["seed"])
        self.shuffle = bool(state["shuffle"])


class BucketedBatchSampler(ReproducibleBatchSampler):
    """Batches of samples of similar length, so little padding is needed; random between batches.

    The order puts ``batch_size * num_replicas`` samples of similar length next to each other (a
    global batch) and each rank takes every ``num_replicas``-th of them, so every rank's batch is
    length-homogeneous. See :func:`fastcore_train.samplers.orders.bucketed_order`.
    """

    def __init__(self, dataset: int | Sized, length: Lengths, batch_size: int,
                 num_batch_per_bucket: int = 10, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0) -> None:
        super().__init__(dataset_length(dataset), batch_size, drop_last)
        self.lengths = read_lengths(length, self.num_samples)
        self.num_batch_per_bucket = _positive("num_batch_per_bucket", num_batch_per_bucket)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(seed)

    def _build_order(self, epoch: int, batch_size: int, num_replicas: int) -> np.ndarray:
        return bucketed_order(self.lengths, self.seed, epoch, self.shuffle,
                              batch_size * num_replicas, self.num_batch_per_bucket)

    def _order_params(self) -> dict[str, Any]:
        return {"seed": self.seed, "shuffle": self.shuffle, "num_batch_per_bucket": self.num_batch_per_bucket}

    def _load_order_params(self, state: dict[str, Any]) -> None:
        self.seed = check_seed(state["seed"])
        self.shuffle = bool(state["shuffle"])
        self.num_batch_per_bucket = _positive("num_batch_per_bucket", state["num_batch_per_bucket"])


class ReproduceBatchSampler(ReproducibleBatchSampler):
    """Makes an index sampler of ours, or any other batch sampler, resumable.

    * Wrapping a :class:`ReproducibleSampler` (or a batch sampler whose ``sampler`` attribute is
      one): the order comes from it and the state holds only its parameters.
    * Wrapping any other batch sampler, i.e. an iterable of lists of indices with optional
      ``batch_size``, ``drop_last`` and ``set_epoch(epoch)``: each epoch's order is the
      concatenation of its batches, read once when that epoch starts. That order cannot be rebuilt
      from a seed, so the state stores its unconsumed part. The wrapped object must not split data
      over ranks itself: call :meth:`set_distributed` on this wrapper instead.

    ``batch_size`` defaults to the wrapped batch sampler's ``batch_size`` (or its first batch's
    length), ``drop_last`` to its ``drop_last`` (or False).
    """

    def __init__(self, sampler_or_batch_sampler: ReproducibleSampler | Iterable[Iterable[int]],
                 batch_size: int | None = None, drop_last: bool | None = None) -> None:
        source = sampler_or_batch_sampler
        if isinstance(source, ReproducibleBatchSampler):
            raise TypeError(f"{type(source).__name__} is already resumable: use it directly")
        inner = source if isinstance(source, ReproducibleSampler) else getattr(source, "sampler", None)
        if inner is not source:
            batch_size = getattr(source, "batch_size", None) if batch_size is None else batch_size
            drop_last = getattr(source, "drop_last", False) if drop_last is None else drop_last
        self.sampler: ReproducibleSampler | None = inner if isinstance(inner, ReproducibleSampler) else None
        self.batch_sampler: Iterable[Iterable[int]] | None = source if self.sampler is None else None
        self._cache: tuple[int, int, np.ndarray] | None = None  # (epoch, start, order[start:]) when wrapping a batch sampler
        if self.sampler is not None:
            if batch_size is None:
                raise ValueError("batch_size is required when wrapping an index sampler")
            super().__init__(self.sampler.num_samples, batch_size, bool(drop_last))
            self.epoch = self.sampler.epoch
            self.set_distributed(self.sampler.num_replicas, self.sampler.rank, self.sampler.pad)
            return
        if not isinstance(source, Iterable):
            raise TypeError(f"expected a ReproducibleSampler or an iterable of index lists, got {type(source).__name__}")
        if batch_size is None:
            order, batch_size = self._read_epoch(0)
            self._cache = (0, 0, order)
        wrapped_sampler = getattr(source, "sampler", None)
        num_samples = len(wrapped_sampler) if isinstance(wrapped_sampler, Sized) else None
        super().__init__(num_samples, batch_size, bool(drop_last))

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        if self.sampler is not None:
            self.sampler.set_epoch(self.epoch)

    def _new_pass(self) -> None:
        super()._new_pass()
        self._cache = None

    def _build_order(self, epoch: int, batch_size: int, num_replicas: int) -> np.ndarray:
        if self.sampler is not None:
            return np.asarray(self.sampler.epoch_order(epoch), dtype=np.int64)
        if self._cache is not None and self._cache[0] == epoch and self._cache[1] == 0:
            return self._cache[2]
        return self._read_epoch(epoch)[0]

    def _order_view(self) -> tuple[int, np.ndarray]:
        if self.sampler is not None:
            return super()._order_view()
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, 0, self._read_epoch(self.epoch)[0])
        return self._cache[1], self._cache[2]

    def _order_length(self) -> int:
        if self.sampler is not None:
            return self.sampler.num_samples
        start, order = self._order_view()
        return start + len(order)

    def _read_epoch(self, epoch: int) -> tuple[np.ndarray, int]:
        """Concatenate the wrapped batch sampler's batches for ``epoch``; also its first batch's size."""
        set_epoch = getattr(self.batch_sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        indices: list[int] = []
        first_size = 0
        for batch in self.batch_sampler:
            try:
                batch = [int(index) for index in batch]
            except TypeError as error:
                raise TypeError("the wrapped batch sampler must yield iterables of integer indices") from error
            first_size = first_size or len(batch)
            indices.extend(batch)
        return np.asarray(indices, dtype=np.int64), max(first_size, 1)

    def _order_params(self) -> dict[str, Any]:
        if self.sampler is None:
            return {"sampler": None}
        inner = self.sampler
        return {"sampler": {"type": type(inner).__name__, "seed": inner.seed, **inner._order_params()}}

    def _load_order_params(self, state: dict[str, Any]) -> None:
        saved = state.get("sampler")
        if self.sampler is None:
            if saved is not None:
                raise ValueError(f"the state wraps a {saved.get('type')!r}, this sampler wraps a batch sampler")
            return
        if not isinstance(saved, dict) or saved.get("type") != type(self.sampler).__name__:
            found = saved.get("type") if isinstance(saved, dict) else "batch sampler"
            raise ValueError(f"the state wraps a {found!r}, this sampler wraps a {type(self.sampler).__name__}")
        self.sampler._load_order_params(saved)

    def state_dict(self, num_consumed_batches: int | None = None) -> dict[str, Any]:
        state = super().state_dict(num_consumed_batches)
        if self.sampler is None:
            remaining = None
            if self._cache is not None:
                _, start, order = self._cache
                remaining = order[state["num_consumed_samples"] - start:].tolist()
            state["order_remaining"] = remaining
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.sampler is not None:
            self.sampler.set_epoch(self.epoch)
            return
        remaining = state.get("order_remaining")
        if remaining is None:
            if self._offset:
                raise ValueError("the state has consumed samples but no saved order to resume")
            return
        self._cache = (self.epoch, self._offset, np.asarray(remaining, dtype=np.int64))


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
