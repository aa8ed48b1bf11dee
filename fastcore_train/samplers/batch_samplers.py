"""Resumable batch samplers: what a data loader's ``batch_sampler`` gets.

Each one yields this rank's batches (lists of python ints) and can save, mid-epoch, how much of
the epoch the training loop really used, even when the loader prefetched more batches.
"""
from __future__ import annotations

import operator
import warnings
from collections.abc import Iterable, Sized
from typing import Any, Optional

import numpy as np

from fastcore_train.samplers.base import (
    FollowsDataset,
    ReproducibleBatchSampler,
    ReproducibleSampler,
    dataset_length,
)
from fastcore_train.samplers.bucketed import BucketedBatchSampler
from fastcore_train.samplers.orders import check_seed, random_order

__all__ = ["BucketedBatchSampler", "RandomBatchSampler", "ReproduceBatchSampler"]


class RandomBatchSampler(FollowsDataset, ReproducibleBatchSampler):
    """Batches of a fresh permutation every epoch, from ``(seed, epoch)`` only.

    ``length`` is accepted, as fastNLP 1.0 did, and not used (a warning says so): these batches
    do not depend on sample lengths; :class:`BucketedBatchSampler` groups by length.
    """

    def __init__(self, dataset: int | Sized, batch_size: int = 32, shuffle: bool = True,
                 drop_last: bool = False, seed: int = 0, length: Optional[Any] = None) -> None:
        super().__init__(dataset_length(dataset), batch_size, drop_last)
        self._keep_dataset(dataset)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(seed)
        if length is not None:
            warnings.warn("RandomBatchSampler ignores length=: its batches do not depend on sample lengths "
                          "(BucketedBatchSampler groups samples of similar length).", stacklevel=2)

    def _build_order(self, epoch: int, batch_size: int, num_replicas: int) -> np.ndarray:
        return random_order(self.num_samples, self.seed, epoch, self.shuffle)

    def _order_length(self) -> int:
        return self.num_samples if self.iterating or self._next_offset() else self._live_length()

    def _resume_length(self, state: dict[str, Any]) -> None:
        if not self.follows:
            return super()._resume_length(state)
        self._check_state(state, None)
        self.num_samples = self._resumed_length(state)

    def _order_params(self) -> dict[str, Any]:
        return {"seed": self.seed, "shuffle": self.shuffle}

    def _load_order_params(self, state: dict[str, Any]) -> None:
        self.seed = check_seed(state["seed"])
        self.shuffle = bool(state["shuffle"])


class ReproduceBatchSampler(ReproducibleBatchSampler):
    """Makes an index sampler of ours, or any other (batch) sampler, resumable.

    * Wrapping a :class:`ReproducibleSampler` (or a batch sampler whose ``sampler`` attribute is
      one): the order comes from it and the state holds only its parameters.
    * Wrapping anything else that yields indices, either one at a time (an index sampler, such
      as ``torch.utils.data.RandomSampler``) or in lists (a batch sampler), with optional
      ``batch_size``, ``drop_last`` and ``set_epoch(epoch)``: each epoch's order is everything it
      yields, read once when that epoch starts. That order cannot be rebuilt from a seed, so the
      state stores it (``index_list``, as fastNLP 1.0 did). The wrapped object must not split
      data over ranks itself: call :meth:`set_distributed` on this wrapper instead.

    ``batch_size`` defaults to the wrapped batch sampler's ``batch_size`` (or its first batch's
    length); it is required for an index sampler. ``drop_last`` defaults to the wrapped object's
    ``drop_last`` (or False).
    """

    def __init__(self, sampler_or_batch_sampler: ReproducibleSampler | Iterable[Any],
                 batch_size: int | None = None, drop_last: bool | None = None) -> None:
        source = sampler_or_batch_sampler
        if isinstance(source, ReproducibleBatchSampler):
            raise TypeError(f"{type(source).__name__} is already resumable: use it directly")
        inner = source if isinstance(source, ReproducibleSampler) else getattr(source, "sampler", None)
        if inner is not source:
            batch_size = getattr(source, "batch_size", None) if batch_size is None else batch_size
            drop_last = getattr(source, "drop_last", False) if drop_last is None else drop_last
        self.sampler: ReproducibleSampler | None = inner if isinstance(inner, ReproducibleSampler) else None
        self.batch_sampler: Iterable[Any] | None = source if self.sampler is None else None
        # When replaying: (epoch, start, order[start:]); start is 0 unless loaded from an old state.
        self._cache: tuple[int, int, np.ndarray] | None = None
        if self.sampler is not None:
            if batch_size is None:
                raise ValueError("batch_size is required when wrapping an index sampler")
            super().__init__(self.sampler.num_samples, batch_size, bool(drop_last))
            self.epoch = self.sampler.epoch
            self.set_distributed(self.sampler.num_replicas, self.sampler.rank, self.sampler.pad)
            return
        if not isinstance(source, Iterable):
            raise TypeError(f"expected a sampler or batch sampler (an iterable of indices or of index lists), "
                            f"got {type(source).__name__}")
        if batch_size is None:
            order, batch_size = self._read_epoch(0)
            if batch_size is None:
                raise ValueError(f"batch_size is required: the wrapped {type(source).__name__} yields single "
                                 "indices, not batches")
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
            fresh = not self.iterating and not self._next_offset()  # the next iteration begins an epoch
            return self.sampler._live_length() if fresh else self.sampler.num_samples
        start, order = self._order_view()
        return start + len(order)

    def _take_live_length(self) -> None:
        if self.sampler is not None:
            self.sampler._take_live_length()
            self.num_samples = self.sampler.num_samples

    def _note_change_mid_epoch(self) -> None:
        if self.sampler is not None:
            self.sampler._note_change_mid_epoch()

    def _resume_length(self, state: dict[str, Any]) -> None:
        if self.sampler is None or not self.sampler.follows:
            return super()._resume_length(state)
        self._check_state(state, None)
        self.num_samples = self.sampler.num_samples = self.sampler._resumed_length(state)

    def _read_epoch(self, epoch: int) -> tuple[np.ndarray, Optional[int]]:
        """Everything the wrapped object yields for ``epoch``, and its first batch's size (None
        when it yields single indices)."""
        set_epoch = getattr(self.batch_sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        indices: list[int] = []
        first_size: Optional[int] = None
        for item in self.batch_sampler:
            if hasattr(item, "__index__") and not isinstance(item, bool) and getattr(item, "ndim", 0) == 0:
                indices.append(operator.index(item))
                continue
            try:
                batch = [_index(index) for index in item]
            except TypeError as error:
                raise TypeError(f"the wrapped {type(self.batch_sampler).__name__} must yield integer indices or "
                                f"lists of them, got a {type(item).__name__}") from error
            first_size = first_size or len(batch) or None
            indices.extend(batch)
        return np.asarray(indices, dtype=np.int64), first_size

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
        """The state; when replaying another sampler's order it includes that order, ``index_list``."""
        state = super().state_dict(num_consumed_batches)
        if self.sampler is None:
            index_list = None
            if self._cache is not None and self._cache[1] == 0:
                index_list = self._cache[2].tolist()
            elif self._cache is not None:  # resumed from an old state holding only the unconsumed part
                state["order_remaining"] = self._cache[2][state["num_consumed_samples"] - self._cache[1]:].tolist()
            state["index_list"] = index_list
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.sampler is not None:
            self.sampler.set_epoch(self.epoch)
            return
        if state.get("index_list") is not None:
            self._cache = (self.epoch, 0, np.asarray(state["index_list"], dtype=np.int64))
        elif state.get("order_remaining") is not None:
            self._cache = (self.epoch, self._offset, np.asarray(state["order_remaining"], dtype=np.int64))
        elif self._offset:
            raise ValueError("the state has consumed samples but no saved order to resume")


def _index(value: Any) -> int:
    """``value`` as a dataset index (anything with ``__index__``: ints, numpy and 0-d tensor integers)."""
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer index")
    return operator.index(value)
