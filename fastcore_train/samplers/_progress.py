"""Epoch, data-parallel layout and resume offset: the bookkeeping every resumable sampler shares.

A sampler's position is the number of leading entries of its epoch order that are consumed. An
offset loaded from a state applies to the next iteration of that epoch only; switching epochs or
finishing a pass starts the next iteration from the beginning of an epoch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

_P = TypeVar("_P", bound="_EpochProgress")


class SamplerUsageError(ValueError, AssertionError):
    """A sampler asked to do something it cannot do now: change its layout during an unfinished
    iteration, or load a state saved by another sampler type or for another dataset length.

    A ``ValueError``; also an ``AssertionError``, which is what fastNLP 1.0 raised in these
    situations, so code written against either keeps catching it.
    """


def check_epoch(epoch: int) -> int:
    """Return ``epoch`` as a python int; epochs are non-negative integers (they seed the order)."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
        raise ValueError(f"epoch must be a non-negative integer, got {epoch!r}")
    return int(epoch)


def check_distributed(num_replicas: int, rank: int) -> tuple[int, int]:
    """Validate a data-parallel layout: ``num_replicas >= 1`` and ``0 <= rank < num_replicas``."""
    for name, value in (("num_replicas", num_replicas), ("rank", rank)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be at least 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank must satisfy 0 <= rank < num_replicas={num_replicas}, got {rank}")
    return int(num_replicas), int(rank)


@dataclass(frozen=True)
class _Pass:
    """What one iteration started from, kept so a state can be computed while it runs."""

    offset: int          # order entries consumed before this iteration
    order_length: int    # length of the epoch's order
    num_replicas: int
    share: int           # entries this rank serves in this iteration
    batch_size: int = 1
    num_items: int = 0   # items (indices or batches) this iteration yields on this rank


class _EpochProgress:
    """Epoch, data-parallel layout and resume offset: the bookkeeping both sampler kinds share."""

    def __init__(self) -> None:
        self.epoch = 0
        self.num_replicas = 1
        self.rank = 0
        self.pad = True
        self._offset = 0                 # order entries consumed before the current/next iteration
        self._pass: _Pass | None = None  # the current iteration, None before the first one
        self._yielded = 0                # items the current iteration has handed out
        self._done = False               # the current iteration has handed out its last item

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order from now on; switching to another epoch starts it from its beginning."""
        epoch = check_epoch(epoch)
        if epoch != self.epoch:
            self.epoch = epoch
            self._new_pass()

    def set_distributed(self: _P, num_replicas: int, rank: int, pad: bool = True) -> _P:
        """Serve only ``rank``'s share of each epoch; call before iterating. Returns ``self``.

        ``pad``: when the epoch does not divide evenly over the ranks, repeat a few samples
        (True) or leave the last few out (False); ranks get equal counts either way. Calling this
        while an iteration is unfinished raises :class:`SamplerUsageError` (the running
        iteration's split cannot change under it); finish or restart the iteration first.
        """
        if self.iterating:
            raise SamplerUsageError(
                f"{type(self).__name__}.set_distributed() was called during an unfinished iteration (it has "
                f"handed out {self._yielded} item(s)); the split of a running iteration cannot change. Call it "
                "before iterating, or after the iteration has ended.")
        self.num_replicas, self.rank = check_distributed(num_replicas, rank)
        self.pad = bool(pad)
        return self

    @property
    def iterating(self) -> bool:
        """True between the start of an iteration and the hand-out of its last item."""
        return self._pass is not None and not self._done

    def _new_pass(self) -> None:
        """Forget the current iteration and any resume offset: the next one covers a whole epoch."""
        self._offset = 0
        self._pass = None
        self._yielded = 0
        self._done = False

    def _begin_iteration(self) -> int:
        """Start an iteration and return its offset; after a finished pass that offset is 0."""
        if self._done:
            self._new_pass()
        self._yielded = 0
        return self._offset

    def _next_offset(self) -> int:
        """The offset the next iteration (or the running one) starts from."""
        return 0 if self._done else self._offset

    def _consumed(self, num_items: int) -> int:
        """Order entries consumed once the current iteration's first ``num_items`` items are used."""
        current = self._pass
        if current is None:
            if num_items:
                raise ValueError(f"no iteration has started since the last set_epoch/load_state_dict, "
                                 f"so {num_items} items cannot have been consumed")
            return self._offset
        if not 0 <= num_items <= self._yielded:
            raise ValueError(f"the current iteration handed out {self._yielded} items, "
                             f"so {num_items} cannot have been consumed")
        if num_items >= current.num_items:
            return current.order_length
        served = min(num_items * current.batch_size, current.share)
        return min(current.offset + current.num_replicas * served, current.order_length)

    def _check_state(self, state: dict[str, Any], num_samples: int | None) -> None:
        """Refuse a state saved by another sampler type or for a dataset of another length."""
        if not isinstance(state, dict) or state.get("type") != type(self).__name__:
            found = state.get("type", state.get("sampler_type")) if isinstance(state, dict) else type(state).__name__
            raise SamplerUsageError(f"cannot load a state of {found!r} into a {type(self).__name__}")
        saved = state.get("dataset_length")
        if saved is not None and num_samples is not None and saved != num_samples:
            raise SamplerUsageError(f"the state was saved for a dataset of {saved} samples, "
                                    f"this sampler has {num_samples}")

    def _restore_progress(self, state: dict[str, Any]) -> None:
        """Go to the saved epoch; its next iteration skips the consumed leading entries."""
        self.epoch = check_epoch(state["epoch"])
        self._new_pass()
        consumed = state["num_consumed_samples"]
        if isinstance(consumed, bool) or not isinstance(consumed, int) or consumed < 0:
            raise ValueError(f"num_consumed_samples must be a non-negative integer, got {consumed!r}")
        self._offset = consumed
