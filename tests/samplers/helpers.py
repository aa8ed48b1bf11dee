"""Shared helpers of the sampler tests: sampler factories and a stop-and-resume driver."""
from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator

import numpy as np

from fastcore_train.samplers import (
    BucketedBatchSampler,
    RandomBatchSampler,
    RandomSampler,
    ReproduceBatchSampler,
    ReproducibleBatchSampler,
    SortedSampler,
)

KINDS = ("random_sampler", "sorted_sampler", "random_batch", "bucketed", "plain")


class PlainBatchSampler:
    """The duck-typed batch sampler contract ReproduceBatchSampler accepts.

    An iterable of lists of indices, with an optional ``batch_size`` attribute and an optional
    ``set_epoch(epoch)``; this one shuffles from ``(seed, epoch)`` so epochs can be compared.
    """

    def __init__(self, num_samples: int, batch_size: int, seed: int = 0) -> None:
        self.num_samples, self.batch_size, self.seed, self.epoch = num_samples, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        order = np.random.default_rng([self.seed, self.epoch, 99]).permutation(self.num_samples).tolist()
        for start in range(0, self.num_samples, self.batch_size):
            yield order[start:start + self.batch_size]


def lengths_for(num_samples: int) -> list[int]:
    return np.random.default_rng(12345).integers(1, 500, size=num_samples).tolist()


def make(kind: str, num_samples: int, batch_size: int, num_replicas: int = 1, rank: int = 0,
         drop_last: bool = False) -> ReproducibleBatchSampler:
    """A batch sampler of ``kind`` for ``rank`` of ``num_replicas``."""
    if kind == "random_sampler":
        sampler = ReproduceBatchSampler(RandomSampler(num_samples, seed=7), batch_size, drop_last)
    elif kind == "sorted_sampler":
        sampler = ReproduceBatchSampler(SortedSampler(num_samples, lengths_for(num_samples)), batch_size, drop_last)
    elif kind == "random_batch":
        sampler = RandomBatchSampler(num_samples, batch_size, drop_last=drop_last, seed=7)
    elif kind == "bucketed":
        sampler = BucketedBatchSampler(num_samples, lengths_for(num_samples), batch_size,
                                       num_batch_per_bucket=2, drop_last=drop_last, seed=7)
    elif kind == "plain":
        sampler = ReproduceBatchSampler(PlainBatchSampler(num_samples, 5, seed=7), batch_size, drop_last)
    else:
        raise ValueError(kind)
    return sampler.set_distributed(num_replicas, rank)


def ranks(kind: str, num_samples: int, batch_size: int, num_replicas: int, **kwargs) -> list[ReproducibleBatchSampler]:
    return [make(kind, num_samples, batch_size, num_replicas, rank, **kwargs) for rank in range(num_replicas)]


def epoch_batches(samplers: list, epoch: int) -> list[list[list[int]]]:
    """Every rank's batches of a whole iteration of ``epoch``."""
    out = []
    for sampler in samplers:
        sampler.set_epoch(epoch)
        out.append(list(sampler))
    return out


def roundtrip(state: dict) -> dict:
    """What a checkpoint gives back: the state through JSON."""
    return json.loads(json.dumps(state))


def run_segments(kind: str, num_samples: int, segments: list[tuple[int, int, float | None]],
                 epoch: int = 1, prefetch: int = 2, drop_last: bool = False):
    """Train ``epoch`` in segments, each one a fresh set of ranks resumed from the previous state.

    A segment ``(batch_size, num_replicas, fraction)`` uses ``round(fraction * len)`` batches
    (all of them for None) while the sampler hands out ``prefetch`` more, then saves.
    Returns every index the training loop used (all ranks), the last samplers and the last state.
    """
    state, used, samplers = None, [], []
    for batch_size, num_replicas, fraction in segments:
        samplers = ranks(kind, num_samples, batch_size, num_replicas, drop_last=drop_last)
        for sampler in samplers:
            if state is not None:
                sampler.load_state_dict(roundtrip(state))
            sampler.set_epoch(epoch)
        lengths = {len(sampler) for sampler in samplers}
        assert len(lengths) == 1, f"ranks disagree on the number of batches: {lengths}"
        total = lengths.pop()
        take = total if fraction is None else round(fraction * total)
        states = []
        for sampler in samplers:
            handed = list(itertools.islice(iter(sampler), take + prefetch))
            assert len(handed) == min(take + prefetch, total)
            used.extend(index for batch in handed[:take] for index in batch)
            states.append(sampler.state_dict(num_consumed_batches=take))
        assert all(s == states[0] for s in states), "ranks saved different states"
        state = states[0]
    return used, samplers, state


def check_exactly_once(used: list[int], num_samples: int, padding_allowance: int) -> None:
    """Every sample was used, and the only repeats are at most ``padding_allowance`` pads."""
    counts = Counter(used)
    assert set(counts) == set(range(num_samples)), "some samples were never used"
    extra = len(used) - num_samples
    assert extra <= padding_allowance, f"{extra} repeats, padding explains at most {padding_allowance}"
