"""Data-parallel split: ranks get equal batch counts, together cover the epoch, repeat only pads."""
from __future__ import annotations

from collections import Counter

import pytest

from fastcore_train.samplers import RandomSampler, SortedSampler

from .helpers import KINDS, epoch_batches, lengths_for, ranks


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("num_replicas", [1, 2, 3, 4])
def test_ranks_cover_the_epoch_with_equal_batch_counts(kind, num_replicas):
    for num_samples, batch_size in [(1, 2), (7, 2), (24, 3), (37, 5)]:
        per_rank = epoch_batches(ranks(kind, num_samples, batch_size, num_replicas), 1)
        assert len({len(batches) for batches in per_rank}) == 1
        used = [index for batches in per_rank for batch in batches for index in batch]
        assert set(used) == set(range(num_samples))
        assert len(used) - num_samples == -num_samples % num_replicas, "only padding repeats"


@pytest.mark.parametrize("kind", KINDS)
def test_ranks_share_the_same_global_order(kind):
    single = [i for batch in epoch_batches(ranks(kind, 30, 3, 1), 2)[0] for i in batch]
    split = epoch_batches(ranks(kind, 30, 3, 3), 2)
    if kind != "bucketed":  # the bucketed order depends on the world size by design
        for rank, batches in enumerate(split):
            assert [i for batch in batches for i in batch] == single[rank::3]


@pytest.mark.parametrize("num_replicas", [2, 3, 4])
def test_padding_repeats_the_leading_entries(num_replicas):
    order = RandomSampler(10, seed=1).epoch_order(0).tolist()
    shares = [list(RandomSampler(10, seed=1).set_distributed(num_replicas, rank)) for rank in range(num_replicas)]
    padded = order + order[:-10 % num_replicas]
    assert shares == [padded[rank::num_replicas] for rank in range(num_replicas)]


def test_unpadded_split_leaves_the_tail_out_so_ranks_stay_equal():
    """pad=False: no repeats, and the last len % ranks samples are left out (fastNLP 1.0, torch's
    DistributedSampler(drop_last=True)), so every rank takes the same number of steps."""
    sampler = SortedSampler(10, lengths_for(10))
    order = sampler.epoch_order(0).tolist()
    shares = [list(SortedSampler(10, lengths_for(10)).set_distributed(4, rank, pad=False)) for rank in range(4)]
    assert [len(share) for share in shares] == [2, 2, 2, 2]
    assert Counter(i for share in shares for i in share) == Counter(order[:8])
