"""Base classes of the resumable samplers, plus the dataset-length and rank-split helpers.

Every sampler defines a deterministic *global order* of dataset indices per epoch. Its state
counts how many leading entries of that order are consumed (``num_consumed_samples``); that count
does not depend on the number of ranks or the batch size, so a run can resume with other values.
An iteration serves ``order[num_consumed_samples:]`` (the *remainder*), split over the ranks.
"""
from __future__ import annotations

import copy
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sized
from typing import Any, Optional

import numpy as np

from fastcore_train.samplers._progress import (SamplerUsageError, _EpochProgress, _Pass, check_distributed,
                                               check_epoch)

__all__ = ["ReproducibleBatchSampler", "ReproducibleSampler", "SamplerUsageError", "check_distributed",
           "check_epoch", "dataset_length", "rank_share", "share_length"]


def dataset_length(dataset: int | Sized) -> int:
    """Number of samples of ``dataset``: either that number itself or ``len(dataset)``."""
    if isinstance(dataset, bool):
        raise TypeError("dataset must be a sized object or a number of samples, got a bool")
    if isinstance(dataset, (int, np.integer)):
        length = int(dataset)
    elif isinstance(dataset, Sized):
        length = len(dataset)
    else:
        raise TypeError(f"dataset must be a sized object or a number of samples, got {type(dataset).__name__}")
    if length < 0:
        raise ValueError(f"a dataset cannot have {length} samples")
    return length


def share_length(remaining: int, num_replicas: int, rank: int, pad: bool) -> int:
    """How many entries :func:`rank_share` gives ``rank`` out of ``remaining`` ones (the same on every rank)."""
    if pad:
        return -(-remaining // num_replicas)
    return remaining // num_replicas


def rank_share(remainder: np.ndarray, num_replicas: int, rank: int, pad: bool,
               pad_from_end: bool = False) -> np.ndarray:
    """This rank's entries of ``remainder``: ``remainder[rank::num_replicas]``, the same count on every rank.

    When ``remainder`` does not divide evenly, ``pad`` extends it to a multiple of
    ``num_replicas`` by repeating its leading entries (its trailing ones with ``pad_from_end``,
    which keeps a length-bucketed last batch homogeneous); without ``pad`` its last
    ``len % num_replicas`` entries are left out, as fastNLP 1.0 and torch's DistributedSampler
    do. Either way data-parallel ranks take the same number of steps and stay in lockstep.
    """
    remainder = np.asarray(remainder, dtype=np.int64)
    extra = remainder.size % num_replicas
    if not extra:
        return remainder[rank::num_replicas]
    if not pad:
        return remainder[:remainder.size - extra][rank::num_replicas]
    missing = num_replicas - extra
    repeated = remainder[-missing:] if pad_from_end and remainder.size >= missing else np.resize(remainder, missing)
    return np.concatenate([remainder, repeated])[rank::num_replicas]


_logger = logging.getLogger("fastcore_train")  # the package logger (fastcore_train.log), without importing it


class FollowsDataset:
    """The dataset length a sampler's epochs use: each new epoch takes the dataset's length anew, as a
    plain DataLoader's sampler does, so samples added (or removed) between epochs are trained.

    The order of an epoch already begun keeps the length it started with (the resume offset counts
    entries of that order). A change met mid-epoch, when its state is saved or loaded, is logged as
    a warning; a state saved mid-epoch of a longer dataset than the current one is an error (its
    order names samples that no longer exist). A sampler built from a number of samples keeps it.
    """

    num_samples: int
    epoch: int
    #: False for a sampler whose order depends on per-sample data read once (lengths).
    follows_dataset_length = True

    def _keep_dataset(self, dataset: int | Sized) -> None:
        self._dataset: Optional[Sized] = None if isinstance(dataset, (int, np.integer)) else dataset
        self._warned_epoch: Optional[int] = None

    @property
    def follows(self) -> bool:
        return getattr(self, "_dataset", None) is not None and self.follows_dataset_length

    def _live_length(self) -> int:
        """The length an epoch started now would use."""
        return dataset_length(self._dataset) if self.follows else self.num_samples

    def _take_live_length(self) -> None:
        """At the start of an epoch's order: use the dataset's current length."""
        live = self._live_length()
        if live != self.num_samples:
            _logger.info("%s: the dataset now has %d samples (%d before); epoch index %d uses all %d.",
                         type(self).__name__, live, self.num_samples, self.epoch, live)
            self.num_samples = live

    def _note_change_mid_epoch(self) -> None:
        """When saving a state mid-epoch: say once per epoch that the dataset changed length under it."""
        if not self.follows or self._warned_epoch == self.epoch:
            return
        live = self._live_length()
        if live != self.num_samples:
            self._warned_epoch = self.epoch
            _logger.warning("%s: the dataset's length changed from %d to %d during epoch index %d. This epoch keeps its "
                            "order of %d samples (so a checkpoint resumes it exactly); the next epoch uses all %d.",
                            type(self).__name__, self.num_samples, live, self.epoch, self.num_samples, live)

    def _resumed_length(self, state: dict[str, Any]) -> int:
        """The length the loaded ``state``'s epoch continues with (its saved one when saved mid-epoch)."""
        live = self._live_length()
        saved, consumed = state.get("dataset_length"), state.get("num_consumed_samples")
        if not isinstance(saved, int) or saved == live or not consumed:
            return live  # the same length, or the epoch not begun: it starts afresh with the current length
        if saved > live and consumed < saved:
            raise SamplerUsageError(
                f"the state was saved for a dataset of {saved} samples, {consumed} of them consumed in epoch "
                f"{state.get('epoch')}, and the dataset now has {live}: the rest of that epoch's order names samples "
                "that no longer exist. Resume with the dataset as it was, or from a checkpoint saved at an epoch's end.")
        if consumed < saved:
            _logger.warning("%s: resuming epoch index %s mid-way: the state was saved with a dataset of %d samples and the "
                            "dataset now has %d. The rest of this epoch follows the saved order of %d samples (exact "
                            "resume); the next epoch uses all %d.", type(self).__name__, state.get("epoch"), saved,
                            live, saved, live)
        return saved

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        """A copy sampling the same dataset (the dataset itself is shared, not copied)."""
        clone = copy.copy(self)
        memo[id(self)] = clone
        for name, value in vars(self).items():
            setattr(clone, name, value if name == "_dataset" else copy.deepcopy(value, memo))
        return clone


class ReproducibleSampler(FollowsDataset, _EpochProgress, ABC):
    """An index sampler whose position can be saved and restored mid-epoch.

    Subclasses define :meth:`epoch_order`; iteration, the rank split and the state live here.
    :meth:`state_dict` counts every index handed out as consumed; when a loader prefetches, wrap
    the sampler in a ``ReproduceBatchSampler`` and tell it how many batches were really used.
    """

    def __init__(self, dataset: int | Sized, seed: int | None = None) -> None:
        super().__init__()
        self.num_samples = dataset_length(dataset)
        self._keep_dataset(dataset)
        self.seed = seed

    @abstractmethod
    def epoch_order(self, epoch: int) -> np.ndarray:
        """The global order of all dataset indices for ``epoch``."""

    def _order_params(self) -> dict[str, Any]:
        """Parameters besides seed and epoch that rebuild the order (saved in the state)."""
        return {}

    def _load_order_params(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`_order_params` saved, plus the seed."""
        self.seed = state.get("seed")

    def __iter__(self) -> Iterator[int]:
        offset = self._begin_iteration()
        if not offset:
            self._take_live_length()
        order = np.asarray(self.epoch_order(self.epoch), dtype=np.int64)
        share = rank_share(order[offset:], self.num_replicas, self.rank, self.pad)
        self._pass = _Pass(offset, len(order), self.num_replicas, len(share), 1, len(share))
        self._done = not len(share)
        return self._serve(share.tolist())

    def _serve(self, share: list[int]) -> Iterator[int]:
        for position, index in enumerate(share, start=1):
            self._yielded = position
            self._done = position == len(share)
            yield index

    def __len__(self) -> int:
        offset = self._next_offset()
        length = self.num_samples if offset or self.iterating else self._live_length()
        return share_length(max(length - offset, 0), self.num_replicas, self.rank, self.pad)

    def state_dict(self) -> dict[str, Any]:
        """Plain-data state: every index handed out so far (on every rank) counts as consumed.

        Its keys are this package's (``type``, ``dataset_length``, ...), not fastNLP 1.0's
        (``sampler_type``, ``length``); ``num_consumed_samples``, ``epoch`` and ``seed`` mean the same.
        """
        consumed = self._consumed(self._yielded)
        if self._pass is not None and consumed < self._pass.order_length:  # mid-epoch
            self._note_change_mid_epoch()
        return {
            "type": type(self).__name__,
            "seed": self.seed,
            "epoch": self.epoch,
            "num_consumed_samples": consumed,
            "dataset_length": self.num_samples,
            "num_replicas": self.num_replicas,
            **self._order_params(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration of the saved epoch serves only its unconsumed remainder."""
        self._check_state(state, None if self.follows else self.num_samples)
        length = self._resumed_length(state) if self.follows else self.num_samples
        self._load_order_params(state)
        self._restore_progress(state)
        self.num_samples = length


class ReproducibleBatchSampler(_EpochProgress, ABC):
    """A batch sampler (a data loader's ``batch_sampler``) whose position can be saved mid-epoch.

    It yields this rank's share of the epoch's remainder in lists of ``batch_size`` python ints.
    Subclasses define :meth:`_build_order`; the state records the ``batch_size`` and
    ``num_replicas`` the epoch's order was built with, so a resume with other values can rebuild it.
    """

    def __init__(self, num_samples: int | None, batch_size: int, drop_last: bool = False) -> None:
        super().__init__()
        self.num_samples = num_samples  # dataset length (None when unknown), checked on load
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.batch_size = int(batch_size)
        self.drop_last = bool(drop_last)
        self._order_shape: tuple[int, int] | None = None  # (batch_size, num_replicas) of this epoch's order

    @abstractmethod
    def _build_order(self, epoch: int, batch_size: int, num_replicas: int) -> np.ndarray:
        """The global order for ``epoch`` when batches of ``batch_size`` go to ``num_replicas`` ranks."""

    #: Pad a rank split with the remainder's trailing entries instead of its leading ones.
    _pad_from_end = False

    def _order_params(self) -> dict[str, Any]:
        """Everything besides epoch, batch size and world size that rebuilds the order (seed, ...)."""
        return {}

    def _load_order_params(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`_order_params` saved."""

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The global order for ``epoch`` with the current batch size and world size."""
        return np.asarray(self._build_order(check_epoch(epoch), self.batch_size, self.num_replicas), dtype=np.int64)

    def _new_pass(self) -> None:
        super()._new_pass()
        self._order_shape = None

    def _order_view(self) -> tuple[int, np.ndarray]:
        """``(start, order[start:])`` of the current epoch; ``start`` <= any resume offset."""
        batch_size, num_replicas = self._order_shape or (self.batch_size, self.num_replicas)
        return 0, np.asarray(self._build_order(self.epoch, batch_size, num_replicas), dtype=np.int64)

    def _order_length(self) -> int:
        """Length of the current epoch's order (of the next epoch's, when the next iteration begins one)."""
        return self.num_samples or 0

    def _take_live_length(self) -> None:
        """At the start of an epoch's order: take the dataset's current length (where it is followed)."""

    def _note_change_mid_epoch(self) -> None:
        """When saving a state mid-epoch: warn if the dataset's length changed (where it is followed)."""

    def _resume_length(self, state: dict[str, Any]) -> None:
        """Check ``state``'s dataset length against this sampler's (followers: adopt the resumed epoch's)."""
        self._check_state(state, self.num_samples)

    def __iter__(self) -> Iterator[list[int]]:
        offset = self._begin_iteration()
        if not offset:
            self._take_live_length()
        if self._order_shape is None:
            self._order_shape = (self.batch_size, self.num_replicas)
        start, order = self._order_view()
        share = rank_share(order[offset - start:], self.num_replicas, self.rank, self.pad, self._pad_from_end)
        num_batches = self._count_batches(len(share))
        self._pass = _Pass(offset, start + len(order), self.num_replicas, len(share), self.batch_size, num_batches)
        self._done = not num_batches
        return self._serve(share, num_batches)

    def _serve(self, share: np.ndarray, num_batches: int) -> Iterator[list[int]]:
        size = self.batch_size
        indices = share.tolist()  # one conversion per epoch; list slices are cheap per batch
        for number in range(1, num_batches + 1):
            self._yielded = number
            self._done = number == num_batches
            yield indices[(number - 1) * size:number * size]

    def _count_batches(self, share: int) -> int:
        return share // self.batch_size if self.drop_last else -(-share // self.batch_size)

    def __len__(self) -> int:
        """Batches this rank yields in the running iteration, or in the next one when none runs."""
        remaining = max(self._order_length() - self._next_offset(), 0)
        return self._count_batches(share_length(remaining, self.num_replicas, self.rank, self.pad))

    def state_dict(self, num_consumed_batches: int | None = None) -> dict[str, Any]:
        """Plain-data state after the training loop used ``num_consumed_batches`` batches.

        Count only batches of the current iteration (since the last ``iter()``), not of the whole
        epoch; None means every batch handed out so far, which over-counts when a loader prefetches.
        """
        used = self._yielded if num_consumed_batches is None else num_consumed_batches
        if isinstance(used, bool) or not isinstance(used, (int, np.integer)):
            raise ValueError(f"num_consumed_batches must be an integer, got {used!r}")
        consumed = self._consumed(int(used))
        if self._pass is not None and consumed < self._pass.order_length:  # mid-epoch (a loader may have drawn more)
            self._note_change_mid_epoch()
        batch_size, num_replicas = self._order_shape or (self.batch_size, self.num_replicas)
        return {
            "type": type(self).__name__,
            "epoch": self.epoch,
            "num_consumed_samples": consumed,
            "dataset_length": self.num_samples,
            "batch_size": batch_size,
            "num_replicas": num_replicas,
            **self._order_params(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the saved epoch's next iteration serves only its unconsumed remainder.

        That epoch's order is rebuilt with the saved batch size and world size; the remainder is
        then split and batched with this sampler's current values.
        """
        self._resume_length(state)
        self._load_order_params(state)
        self._restore_progress(state)
        self._order_shape = check_order_shape(state)


def check_order_shape(state: dict[str, Any]) -> tuple[int, int]:
    """The saved ``(batch_size, num_replicas)``, validated."""
    batch_size, num_replicas = state.get("batch_size"), state.get("num_replicas")
    for name, value in (("batch_size", batch_size), ("num_replicas", num_replicas)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"the state's {name} must be a positive integer, got {value!r}")
    return batch_size, num_replicas
