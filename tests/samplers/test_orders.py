"""Each sampler's order: deterministic from (seed, epoch), new per epoch when shuffling, and its
length and drop_last behaviour."""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train.samplers import (
    BucketedBatchSampler,
    RandomBatchSampler,
    RandomSampler,
    ReproduceBatchSampler,
    SequentialSampler,
    SortedSampler,
)

from .helpers import KINDS, PlainBatchSampler, epoch_batches, lengths_for, make, ranks


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_and_epoch_give_the_same_batches(kind):
    assert epoch_batches(ranks(kind, 41, 4, 1), 3) == epoch_batches(ranks(kind, 41, 4, 1), 3)


@pytest.mark.parametrize("kind", ["random_sampler", "random_batch", "bucketed", "plain"])
def test_epochs_differ_when_shuffling(kind):
    sampler = make(kind, 41, 4)
    assert epoch_batches([sampler], 0) != epoch_batches([sampler], 1)
    assert epoch_batches([sampler], 0) == epoch_batches([make(kind, 41, 4)], 0), "set_epoch back to 0 restores it"


def test_seed_changes_the_order_and_no_global_random_state_is_used():
    np.random.seed(0)
    first = list(RandomBatchSampler(30, 4, seed=1))
    np.random.seed(1)
    assert list(RandomBatchSampler(30, 4, seed=1)) == first
    assert list(RandomBatchSampler(30, 4, seed=2)) != first


def test_index_samplers():
    assert list(SequentialSampler(5)) == [0, 1, 2, 3, 4]
    assert list(RandomSampler(5, shuffle=False)) == [0, 1, 2, 3, 4]
    shuffled = RandomSampler(50, seed=4)
    assert sorted(shuffled) == list(range(50)) and list(shuffled) != list(range(50))
    assert len(shuffled) == 50 and all(type(index) is int for index in shuffled)
    assert list(SortedSampler(["aa", "b", "cccc", "dd"], length=[2, 1, 4, 2])) == [2, 0, 3, 1]
    assert list(SortedSampler(4, length=lambda i: [2, 1, 4, 2][i])) == [2, 0, 3, 1]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("drop_last", [False, True])
def test_len_matches_iteration_and_drop_last_keeps_full_batches(kind, drop_last):
    for num_samples, batch_size in [(0, 3), (1, 3), (10, 3), (12, 4), (13, 20)]:
        sampler = make(kind, num_samples, batch_size, drop_last=drop_last)
        batches = list(sampler)
        assert len(sampler) == len(batches)
        sizes = [len(batch) for batch in batches]
        if drop_last:
            assert all(size == batch_size for size in sizes)
            assert sum(sizes) == num_samples // batch_size * batch_size
        else:
            assert all(size == batch_size for size in sizes[:-1]) and sum(sizes) == num_samples
        assert all(type(index) is int for batch in batches for index in batch)


@pytest.mark.parametrize("kind", KINDS)
def test_len_counts_from_the_resume_offset(kind):
    sampler = make(kind, 30, 4)
    iterator = iter(sampler)
    next(iterator)
    assert len(sampler) == 8, "a running iteration reports its own length"
    resumed = make(kind, 30, 7)
    resumed.load_state_dict(sampler.state_dict())
    assert len(resumed) == len(list(resumed)) == 4  # 26 samples left in batches of 7
    assert len(resumed) == 5, "the next pass covers the whole epoch again"


def test_set_epoch_keeps_the_offset_only_for_the_saved_epoch():
    sampler = make("random_batch", 30, 4)
    sampler.set_epoch(2)
    iterator = iter(sampler)
    next(iterator)
    state = sampler.state_dict()
    same = make("random_batch", 30, 4)
    same.load_state_dict(state)
    same.set_epoch(2)
    assert len(list(same)) == 7
    other = make("random_batch", 30, 4)
    other.load_state_dict(state)
    other.set_epoch(3)
    assert len(list(other)) == 8 and other.state_dict()["num_consumed_samples"] == 30


def test_reproduce_batch_sampler_reads_batch_size_from_the_wrapped():
    assert ReproduceBatchSampler(PlainBatchSampler(10, 3)).batch_size == 3

    class NoAttributes:
        def __iter__(self):
            return iter([[4, 3], [2, 1], [0]])

    sampler = ReproduceBatchSampler(NoAttributes())
    assert sampler.batch_size == 2 and list(sampler) == [[4, 3], [2, 1], [0]]
    assert ReproduceBatchSampler(NoAttributes(), batch_size=3).state_dict()["batch_size"] == 3


def test_a_batch_sampler_over_one_of_our_samplers_is_unwrapped():
    class TorchLike:  # the attributes torch.utils.data.BatchSampler has
        def __init__(self, sampler, batch_size, drop_last):
            self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

        def __iter__(self):
            raise AssertionError("the order comes from the inner sampler, not from iterating this")

    inner = RandomSampler(10, seed=5)
    sampler = ReproduceBatchSampler(TorchLike(inner, 4, True))
    assert sampler.sampler is inner and sampler.drop_last and sampler.batch_size == 4
    assert list(sampler) == [inner.epoch_order(0)[:4].tolist(), inner.epoch_order(0)[4:8].tolist()]
    assert "index_list" not in sampler.state_dict()


def test_bucketed_batches_hold_similar_lengths():
    lengths = np.asarray(lengths_for(400))

    def mean_spread(sampler):
        return np.mean([np.ptp(lengths[batch]) for batch in sampler])

    bucketed = BucketedBatchSampler(400, lengths, 8, num_batch_per_bucket=5, seed=3)
    random = RandomBatchSampler(400, 8, seed=3)
    assert mean_spread(bucketed) * 4 < mean_spread(random)
    for batch in bucketed:
        assert np.all(np.diff(lengths[batch]) <= 0)


def test_bucketed_short_global_batch_stays_last():
    sampler = BucketedBatchSampler(21, lengths_for(21), batch_size=2, num_batch_per_bucket=2, seed=0)
    sampler.set_distributed(2, 0)
    for epoch in range(5):
        order = sampler.epoch_order(epoch)
        assert sorted(order.tolist()) == list(range(21))
        # every full global batch (4 entries) is sorted longest first; the 1-entry one is last
        lengths = np.asarray(lengths_for(21))
        for chunk in np.split(order[:20], 5):
            assert np.all(np.diff(lengths[chunk]) <= 0)


def test_unshuffled_bucketed_order_is_the_same_every_epoch():
    sampler = BucketedBatchSampler(30, lengths_for(30), 4, shuffle=False)
    assert epoch_batches([sampler], 0) == epoch_batches([sampler], 5)
