"""Evaluation samplers: disjoint rank shares whose union is the dataset, no padding."""
from __future__ import annotations

import pytest

from fastcore_train.samplers import UnrepeatedRandomSampler, UnrepeatedSequentialSampler, UnrepeatedSortedSampler

from .helpers import lengths_for, roundtrip

FACTORIES = {
    "random": lambda n: UnrepeatedRandomSampler(n, shuffle=True, seed=3),
    "sequential": UnrepeatedSequentialSampler,
    "sorted": lambda n: UnrepeatedSortedSampler(n, lengths_for(n)),
}


@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("num_replicas", [1, 2, 3, 4])
def test_shares_are_disjoint_and_cover_the_dataset(name, num_replicas):
    for num_samples in (0, 1, 3, 10, 33):
        shares = []
        for rank in range(num_replicas):
            sampler = FACTORIES[name](num_samples).set_distributed(num_replicas, rank)
            share = list(sampler)
            assert len(sampler) == len(share) and all(type(index) is int for index in share)
            shares.append(share)
        used = [index for share in shares for index in share]
        assert sorted(used) == list(range(num_samples))
        assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_orders():
    assert list(UnrepeatedSequentialSampler(4)) == [0, 1, 2, 3]
    assert list(UnrepeatedRandomSampler(4)) == [0, 1, 2, 3], "no shuffling by default"
    assert list(UnrepeatedSortedSampler(4, [1, 3, 3, 2])) == [1, 2, 3, 0]
    shuffled = UnrepeatedRandomSampler(40, shuffle=True, seed=1)
    first = list(shuffled)
    assert first == list(UnrepeatedRandomSampler(40, shuffle=True, seed=1))
    shuffled.set_epoch(1)
    assert list(shuffled) != first and sorted(shuffled) == list(range(40))


def test_state_roundtrip_and_checks():
    sampler = UnrepeatedRandomSampler(20, shuffle=True, seed=4)
    sampler.set_epoch(3)
    other = UnrepeatedRandomSampler(20, seed=0)
    other.load_state_dict(roundtrip(sampler.state_dict()))
    assert list(other) == list(sampler)
    with pytest.raises(ValueError, match="UnrepeatedRandomSampler"):
        UnrepeatedSequentialSampler(20).load_state_dict(sampler.state_dict())
    with pytest.raises(ValueError, match="20 samples"):
        UnrepeatedRandomSampler(21).load_state_dict(sampler.state_dict())
    with pytest.raises(ValueError, match="rank"):
        UnrepeatedSequentialSampler(5).set_distributed(2, 2)
