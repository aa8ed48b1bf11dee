"""``BucketedBatchSampler``: batches of samples of near-equal length, resumable mid-epoch.

The epoch's order is built in *stages*. The first stage buckets the whole epoch for the batch
size, world size and bucket size of the run. A run resumed mid-epoch with the same values
continues that order exactly; one resumed with other values keeps the consumed prefix and
re-buckets the rest for the new values (a new stage starting at the resume offset), so its
batches stay length-homogeneous. The stages are part of the state, so any later save and resume
rebuilds the very same order.
"""
from __future__ import annotations

from collections.abc import Sized
from typing import Any, Optional

import numpy as np

from fastcore_train.samplers.base import ReproducibleBatchSampler, dataset_length
from fastcore_train.samplers.orders import Lengths, bucketed_order, check_seed, read_lengths

#: (batch_size, num_replicas, num_batch_per_bucket, start offset) of one stage of an epoch's order.
Stage = tuple[int, int, int, int]


class BucketedBatchSampler(ReproducibleBatchSampler):
    """Batches of samples of near-equal length (little padding), in random order between batches.

    Samples are sorted by ``length`` (one number per sample, or ``callable(index)``), cut into
    buckets of ``batch_size * num_batch_per_bucket`` samples of neighbouring lengths per rank,
    shuffled within each bucket and batched; the batches are then shuffled (``shuffle=False``:
    longest first, no shuffling). In data parallel the i-th batch of every rank comes from the same
    bucket, so ranks pad alike. fastNLP 1.0's parameters and grouping.
    """

    _pad_from_end = True  # a padded rank repeats samples of the last (short) batch, not the longest ones

    def __init__(self, dataset: int | Sized, length: Lengths, batch_size: int = 32,
                 num_batch_per_bucket: int = 10, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0) -> None:
        super().__init__(dataset_length(dataset), batch_size, drop_last)
        self.lengths = read_lengths(length, self.num_samples)
        self.num_batch_per_bucket = _positive("num_batch_per_bucket", num_batch_per_bucket)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(seed)
        self._stages: Optional[list[Stage]] = None  # the current epoch's, once an iteration or a load fixed them
        self._cache: Optional[tuple[int, tuple[Stage, ...], np.ndarray]] = None

    def _shape(self, start: int) -> Stage:
        return self.batch_size, self.num_replicas, self.num_batch_per_bucket, start

    def _build_order(self, epoch: int, batch_size: int, num_replicas: int) -> np.ndarray:
        return bucketed_order(self.lengths, self.seed, epoch, self.shuffle, batch_size * num_replicas,
                              self.num_batch_per_bucket)

    def _begin_iteration(self) -> int:
        offset = super()._begin_iteration()
        if not self._stages or not offset:
            self._stages = [self._shape(0)]
        elif self._stages[-1][:3] != self._shape(offset)[:3]:
            self._stages.append(self._shape(offset))  # resumed with other values: re-bucket the rest
        return offset

    def _new_pass(self) -> None:
        super()._new_pass()
        self._stages = None

    def _order_view(self) -> tuple[int, np.ndarray]:
        stages = tuple(self._stages or [self._shape(0)])
        if self._cache is None or self._cache[:2] != (self.epoch, stages):
            order = np.empty(0, dtype=np.int64)
            for batch_size, num_replicas, per_bucket, start in stages:
                rest = None if start == 0 else order[start:]
                built = bucketed_order(self.lengths, self.seed, self.epoch, self.shuffle, batch_size * num_replicas,
                                       per_bucket, indices=rest, salt=start)
                order = np.concatenate([order[:start], built])
            self._cache = (self.epoch, stages, order)
        return 0, self._cache[2]

    def _order_params(self) -> dict[str, Any]:
        stages = self._stages or [self._shape(0)]
        return {"seed": self.seed, "shuffle": self.shuffle, "num_batch_per_bucket": stages[0][2],
                "stages": [list(stage) for stage in stages]}

    def _load_order_params(self, state: dict[str, Any]) -> None:
        self.seed = check_seed(state["seed"])
        self.shuffle = bool(state["shuffle"])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        stages = state.get("stages")
        if stages is None:  # a state from before stages were saved: one stage, its saved values
            per_bucket = _positive("num_batch_per_bucket", state.get("num_batch_per_bucket", self.num_batch_per_bucket))
            stages = [(state["batch_size"], state["num_replicas"], per_bucket, 0)]
        self._stages = [_check_stage(stage) for stage in stages]


def _check_stage(stage: Any) -> Stage:
    if not isinstance(stage, (list, tuple)) or len(stage) != 4:
        raise ValueError(f"a saved bucketing stage must be [batch_size, num_replicas, num_batch_per_bucket, start], "
                         f"got {stage!r}")
    batch_size, num_replicas, per_bucket, start = stage
    for name, value in (("batch_size", batch_size), ("num_replicas", num_replicas),
                        ("num_batch_per_bucket", per_bucket)):
        _positive(f"the saved stage's {name}", value)
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"the saved stage's start must be a non-negative integer, got {start!r}")
    return int(batch_size), int(num_replicas), int(per_bucket), int(start)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
