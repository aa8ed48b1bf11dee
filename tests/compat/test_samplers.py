"""fastNLP 1.0's sampler behaviours (issue 12, items 2 and 6), written here from its docs and tests.

Framework-free: these run in every tox env. Lengths are the dataset indices themselves, so a
batch's length spread is ``max(batch) - min(batch)``.
"""
from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest

from fastcore_train.samplers import (BucketedBatchSampler, RandomBatchSampler, RandomSampler, ReproduceBatchSampler,
                                     SamplerUsageError, SequentialSampler, UnrepeatedRandomSampler,
                                     UnrepeatedSequentialSampler)


def spread(batch):
    return max(batch) - min(batch)


def bucketed(num, batch_size, per_bucket=4, shuffle=True, **kwargs):
    return BucketedBatchSampler(num, list(range(num)), batch_size=batch_size, num_batch_per_bucket=per_bucket,
                                shuffle=shuffle, **kwargs)


# ------------------------------------------------------------------ item 2: BucketedBatchSampler grouping
@pytest.mark.parametrize("shuffle", [True, False])
def test_bucketed_batches_hold_neighbouring_lengths(shuffle):
    """Sorted by length before bucketing: a batch's lengths lie within one bucket of neighbours."""
    sampler = bucketed(1000, 7, per_bucket=4, shuffle=shuffle)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert max(spread(b) for b in batches) < 7 * 4
    random_spread = np.mean([spread(b) for b in RandomBatchSampler(1000, 7, seed=0)])
    assert np.mean([spread(b) for b in batches]) * 20 < random_spread


def test_unshuffled_bucketed_batches_are_longest_first_and_split_rank_by_rank():
    """shuffle=False: rank r of R gets the length-sorted order's entries r, r+R, ... in batches."""
    lengths = np.random.default_rng(0).integers(1, 100, 50)
    order = np.argsort(-lengths, kind="stable")
    for rank in range(3):
        sampler = BucketedBatchSampler(50, lengths, batch_size=4, shuffle=False).set_distributed(3, rank, pad=False)
        served = [i for batch in sampler for i in batch]
        assert served == order[:48][rank::3].tolist()


@pytest.mark.parametrize("pad", [True, False])
@pytest.mark.parametrize("num", [13, 100, 623])
def test_bucketed_ranks_take_the_same_bucket_at_each_step(pad, num):
    samplers = [bucketed(num, 6, per_bucket=10).set_distributed(2, rank, pad=pad) for rank in range(2)]
    per_rank = [list(sampler) for sampler in samplers]
    assert len(per_rank[0]) == len(per_rank[1]) == len(samplers[0])
    for step in zip(*per_rank):
        assert spread([i for batch in step for i in batch]) < 6 * 10 * 2


def test_bucketed_resume_with_other_sizes_rebuckets_the_rest_exactly():
    """A run resumed with another batch size keeps homogeneous batches, sees each remaining
    sample once, and its own state resumes it bit for bit."""
    first = bucketed(500, 7, per_bucket=4)
    first.set_epoch(3)
    seen = [i for batch in itertools.islice(iter(first), 10) for i in batch]
    state = json.loads(json.dumps(first.state_dict(num_consumed_batches=10)))

    second = bucketed(500, 3, per_bucket=5)
    second.load_state_dict(state)
    second.set_epoch(3)
    iterator = iter(second)
    head = list(itertools.islice(iterator, 6))
    state2 = json.loads(json.dumps(second.state_dict(num_consumed_batches=6)))
    tail = list(iterator)
    rest = [i for batch in head + tail for i in batch]
    assert sorted(seen + rest) == list(range(500))
    remaining = np.sort(rest)
    assert all(spread(batch) <= np.max(remaining[15:] - remaining[:-15]) for batch in head + tail)

    third = bucketed(500, 3, per_bucket=5)
    third.load_state_dict(state2)
    third.set_epoch(3)
    assert list(third) == tail


def test_bucketed_padding_repeats_samples_of_the_last_batch():
    """pad=True repeats a sample of the short last batch, so that batch stays homogeneous."""
    samplers = [bucketed(25, 4, per_bucket=2).set_distributed(2, rank) for rank in range(2)]
    last = [list(sampler)[-1] for sampler in samplers]
    assert spread(last[0] + last[1]) < 4 * 2 * 2


# ------------------------------------------------------------------ rank balancing with pad=False
@pytest.mark.parametrize("make", [
    lambda: RandomBatchSampler(23, 4, seed=1),
    lambda: bucketed(23, 4),
    lambda: ReproduceBatchSampler(RandomSampler(23, seed=1), 4),
])
def test_unpadded_ranks_get_equal_counts_and_no_repeats(make):
    shares = [make().set_distributed(3, rank, pad=False) for rank in range(3)]
    served = [[i for batch in sampler for i in batch] for sampler in shares]
    assert [len(s) for s in served] == [7, 7, 7] and [len(s) for s in shares] == [2, 2, 2]
    flat = [i for s in served for i in s]
    assert len(set(flat)) == len(flat) == 21


def test_unpadded_index_sampler_leaves_the_tail_out():
    shares = [list(RandomSampler(10, shuffle=False).set_distributed(4, rank, pad=False)) for rank in range(4)]
    assert shares == [[0, 4], [1, 5], [2, 6], [3, 7]]


# ------------------------------------------------------------------ item 6: ReproduceBatchSampler over index samplers
class IndexSampler:
    """An index sampler of the kind fastNLP users wrap (a torch-style sampler yielding ints)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_reproduce_batch_sampler_batches_an_index_sampler_and_resumes():
    sampler = ReproduceBatchSampler(IndexSampler(100), batch_size=4, drop_last=False)
    iterator = iter(sampler)
    assert [next(iterator) for _ in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    state = sampler.state_dict()
    assert state["num_consumed_samples"] == 12 and state["index_list"] == list(range(100))

    resumed = ReproduceBatchSampler(IndexSampler(100), batch_size=7, drop_last=False)
    resumed.load_state_dict(state)
    batches = list(resumed)
    assert batches[0] == list(range(12, 19)) and [i for b in batches for i in b] == list(range(12, 100))
    assert list(resumed)[0] == list(range(7)), "the next epoch starts from the beginning"


def test_reproduce_batch_sampler_needs_a_batch_size_for_an_index_sampler():
    with pytest.raises(ValueError, match="batch_size is required"):
        ReproduceBatchSampler(IndexSampler(10))


# ------------------------------------------------------------------ item 6: the same errors in the same situations
@pytest.mark.parametrize("make", [lambda: RandomSampler(20), lambda: RandomBatchSampler(20, 4), lambda: bucketed(20, 4)])
def test_set_distributed_during_an_iteration_is_an_error(make):
    sampler = make()
    for _ in sampler:
        with pytest.raises(SamplerUsageError, match="unfinished iteration"):
            sampler.set_distributed(2, 0)
        with pytest.raises(AssertionError):  # what fastNLP 1.0 raised, still caught
            sampler.set_distributed(2, 0)
        break
    for _ in sampler:  # a full pass ends the iteration
        pass
    sampler.set_distributed(2, 0)


def test_loading_a_state_of_another_dataset_length_is_an_error():
    state = RandomSampler(100).state_dict()
    with pytest.raises(SamplerUsageError, match="100 samples"):
        RandomSampler(10).load_state_dict(state)
    with pytest.raises(AssertionError):
        RandomSampler(10).load_state_dict(state)
    with pytest.raises(ValueError):
        SequentialSampler(100).load_state_dict(state)  # another sampler type


# ------------------------------------------------------------------ item 6: fastNLP's keyword arguments
def test_fastnlp_keyword_arguments_are_accepted():
    with pytest.warns(UserWarning, match="ignores length"):
        sampler = RandomBatchSampler(list(range(10)), length=list(range(10)), batch_size=3)
    assert len(list(sampler)) == 4
    assert RandomBatchSampler(100).batch_size == 32 and BucketedBatchSampler(100, [1] * 100).batch_size == 32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert list(UnrepeatedSequentialSampler(list(range(5)), length=[1] * 5)) == [0, 1, 2, 3, 4]
    assert list(UnrepeatedRandomSampler(list(range(5)), False)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("num_replicas", [2, 3])
@pytest.mark.parametrize("num", [3, 10, 101])
def test_unrepeated_sequential_chunk_dist_gives_contiguous_chunks(num_replicas, num):
    chunks = [list(UnrepeatedSequentialSampler(num, chunk_dist=True).set_distributed(num_replicas, rank))
              for rank in range(num_replicas)]
    assert [i for chunk in chunks for i in chunk] == list(range(num))
    size = num // num_replicas
    assert all(len(chunk) == size for chunk in chunks[:-1])
    assert [len(list(UnrepeatedSequentialSampler(num, chunk_dist=True).set_distributed(num_replicas, r)))
            for r in range(num_replicas)] == [len(c) for c in chunks]
    interleaved = [list(UnrepeatedSequentialSampler(num).set_distributed(num_replicas, r)) for r in range(num_replicas)]
    assert interleaved[0][:2] == [0, num_replicas][:len(interleaved[0][:2])]
