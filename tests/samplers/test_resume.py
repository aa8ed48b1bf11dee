"""Exact resume: stopped anywhere and resumed with any batch size or world size, an epoch serves
each sample once (up to distributed padding), and later epochs match an uninterrupted run."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from fastcore_train.samplers import RandomSampler

from .helpers import KINDS, PlainBatchSampler, check_exactly_once, epoch_batches, ranks, roundtrip, run_segments

SIZES = (1, 6, 37)
FRACTIONS = (0.0, 0.3, 0.7, 1.0)
# (saved batch size, saved world size) -> (resumed batch size, resumed world size)
LAYOUTS = [((4, 1), (4, 1)), ((4, 1), (3, 1)), ((3, 2), (3, 1)), ((3, 2), (5, 3)),
           ((2, 3), (4, 2)), ((5, 1), (2, 4)), ((1, 4), (1, 4))]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("saved, resumed", LAYOUTS)
def test_one_resume_serves_the_rest_of_the_epoch_once(kind, saved, resumed):
    for num_samples, fraction in itertools.product(SIZES, FRACTIONS):
        segments = [(*saved, fraction), (*resumed, None)]
        used, samplers, state = run_segments(kind, num_samples, segments, epoch=3)
        check_exactly_once(used, num_samples, saved[1] - 1 + resumed[1] - 1)
        assert state["num_consumed_samples"] == num_samples
        fresh = ranks(kind, num_samples, resumed[0], resumed[1])
        assert epoch_batches(samplers, 4) == epoch_batches(fresh, 4), "the next epoch differs"


CHAINS = [[(4, 1, 0.3), (4, 1, 0.5), (4, 1, None)],
          [(3, 2, 0.4), (2, 1, 0.5), (5, 3, None)],
          [(2, 3, 0.2), (2, 3, 0.2), (4, 2, 0.5), (1, 1, None)],
          [(6, 1, 0.5), (6, 2, 0.0), (6, 2, 0.5), (6, 1, None)]]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chain", CHAINS)
def test_repeated_saves_in_one_epoch_never_replay(kind, chain):
    """Saving again after a resume counts from the resume point (fastNLP 1.0 replayed data here)."""
    for num_samples in (5, 40, 97):
        used, samplers, _ = run_segments(kind, num_samples, chain, epoch=0)
        check_exactly_once(used, num_samples, sum(replicas - 1 for _, replicas, _ in chain))
        fresh = ranks(kind, num_samples, chain[-1][0], chain[-1][1])
        assert epoch_batches(samplers, 1) == epoch_batches(fresh, 1)


def test_without_padding_repeats_nothing_at_all():
    used, _, _ = run_segments("random_batch", 50, [(4, 1, 0.4), (3, 1, 0.5), (7, 1, None)])
    assert sorted(used) == list(range(50))


@pytest.mark.parametrize("kind", KINDS)
def test_consumed_samples_are_a_prefix_of_the_epoch_order(kind):
    sampler = ranks(kind, 30, 4, 1)[0]
    sampler.set_epoch(2)
    order = sampler.epoch_order(2).tolist()
    used = [i for batch in itertools.islice(iter(sampler), 3) for i in batch]
    state = sampler.state_dict(num_consumed_batches=3)
    assert state["num_consumed_samples"] == 12 and used == order[:12]


@pytest.mark.parametrize("kind", KINDS)
def test_state_right_after_loading_is_the_loaded_state(kind):
    _, samplers, state = run_segments(kind, 40, [(3, 2, 0.5)], epoch=1)
    resumed = ranks(kind, 40, 5, 3)[1]
    resumed.load_state_dict(roundtrip(state))
    again = resumed.state_dict()
    assert again["num_consumed_samples"] == state["num_consumed_samples"]
    assert (again["batch_size"], again["num_replicas"]) == (3, 2)  # the values the epoch's order was built with


def test_index_sampler_resumes_with_another_world_size():
    order = RandomSampler(23, seed=3).epoch_order(5).tolist()
    old = [RandomSampler(23, seed=3).set_distributed(2, rank) for rank in range(2)]
    used = []
    for sampler in old:
        sampler.set_epoch(5)
        used += list(itertools.islice(iter(sampler), 4))
    state = old[0].state_dict()
    assert state == old[1].state_dict() and state["num_consumed_samples"] == 8
    assert sorted(used) == sorted(order[:8])
    new = [RandomSampler(23, seed=99).set_distributed(3, rank) for rank in range(3)]
    for sampler in new:
        sampler.load_state_dict(roundtrip(state))
        sampler.set_epoch(5)
    assert len({len(sampler) for sampler in new}) == 1 and len(new[0]) == 5
    rest = [index for sampler in new for index in sampler]
    check_exactly_once(used + rest, 23, padding_allowance=(2 - 1) + (3 - 1))
    second_pass = [index for sampler in new for index in sampler]
    assert len(second_pass) == 24 and set(second_pass) == set(range(23)), "a finished pass resets the offset"
    for sampler in new:
        sampler.set_epoch(6)
    fresh = [RandomSampler(23, seed=3).set_distributed(3, rank) for rank in range(3)]
    for sampler in fresh:
        sampler.set_epoch(6)
    assert [list(s) for s in new] == [list(s) for s in fresh]


def test_wrapped_batch_sampler_order_is_replayed_from_the_state():
    """A wrapped batch sampler that never repeats itself still resumes: the state holds the order."""

    class Unrepeatable(PlainBatchSampler):
        def __iter__(self):
            self.epoch += 1  # a different order on every iteration, ignoring set_epoch
            return super().__iter__()

    from fastcore_train.samplers import ReproduceBatchSampler

    first = ReproduceBatchSampler(Unrepeatable(30, 4, seed=1))
    first.set_epoch(0)
    handed = list(itertools.islice(iter(first), 5))
    state = roundtrip(first.state_dict(num_consumed_batches=3))
    assert len(state["index_list"]) == 30  # the whole epoch's order, as fastNLP 1.0 saved it
    second = ReproduceBatchSampler(Unrepeatable(30, 4, seed=2), batch_size=7)
    second.load_state_dict(state)
    second.set_epoch(0)
    rest = [i for batch in second for i in batch]
    used = [i for batch in handed[:3] for i in batch]
    assert rest == state["index_list"][12:] and sorted(used + rest) == list(range(30))


def test_resuming_a_finished_epoch_serves_nothing_then_moves_on():
    sampler = ranks("random_batch", 20, 3, 1)[0]
    sampler.set_epoch(0)
    list(sampler)
    state = roundtrip(sampler.state_dict())
    assert state["num_consumed_samples"] == 20
    resumed = ranks("random_batch", 20, 3, 1)[0]
    resumed.load_state_dict(state)
    resumed.set_epoch(0)
    assert len(resumed) == 0 and list(resumed) == []
    resumed.set_epoch(1)
    assert list(resumed) == epoch_batches(ranks("random_batch", 20, 3, 1), 1)[0]


def test_prefetched_but_unused_last_batches_are_not_consumed():
    sampler = ranks("random_batch", 10, 3, 1)[0]
    batches = list(sampler)  # the loader prefetched everything
    state = sampler.state_dict(num_consumed_batches=2)
    assert state["num_consumed_samples"] == 6
    resumed = ranks("random_batch", 10, 3, 1)[0]
    resumed.load_state_dict(roundtrip(state))
    assert list(resumed) == batches[2:]


def test_bucketed_batches_stay_homogeneous_across_a_resume():
    from .helpers import lengths_for

    lengths = np.asarray(lengths_for(120))
    _, _, state = run_segments("bucketed", 120, [(4, 2, 0.5)], epoch=2)
    samplers = ranks("bucketed", 120, 4, 2)
    global_batches = [set(chunk) for chunk in np.split(samplers[0].epoch_order(2), 120 // 8)]
    for sampler in samplers:
        sampler.load_state_dict(roundtrip(state))
        sampler.set_epoch(2)
        for batch in sampler:
            assert any(set(batch) <= chunk for chunk in global_batches)
    for batch in epoch_batches(ranks("bucketed", 120, 4, 2), 3)[0]:
        assert np.all(np.diff(lengths[batch]) <= 0), "a batch of a global batch keeps the sorted order"


@pytest.mark.parametrize("kind", KINDS)
def test_drop_last_resume_repeats_nothing_and_a_finished_epoch_stays_finished(kind):
    for num_samples in (11, 38):
        used, _, state = run_segments(kind, num_samples, [(4, 1, 0.5), (3, 1, None)], drop_last=True)
        assert len(used) == len(set(used)) and num_samples - len(used) < 3
        assert state["num_consumed_samples"] == num_samples
        resumed = ranks(kind, num_samples, 1, 1, drop_last=True)[0]
        resumed.load_state_dict(roundtrip(state))
        resumed.set_epoch(1)
        assert list(resumed) == [], "samples dropped at the end of a finished epoch are not served later"


@pytest.mark.parametrize("kind", KINDS)
def test_random_stop_and_resume_sweep(kind):
    """A seeded sweep over dataset sizes, chains of segments, batch sizes, world sizes and prefetch."""
    rng = np.random.default_rng(2024)
    for _ in range(60):
        num_samples = int(rng.integers(1, 80))
        chain = [(int(rng.integers(1, 7)), int(rng.integers(1, 5)), float(rng.random()))
                 for _ in range(int(rng.integers(1, 4)))]
        chain.append((int(rng.integers(1, 7)), int(rng.integers(1, 5)), None))
        epoch = int(rng.integers(0, 5))
        used, samplers, _ = run_segments(kind, num_samples, chain, epoch=epoch, prefetch=int(rng.integers(0, 4)))
        check_exactly_once(used, num_samples, sum(replicas - 1 for _, replicas, _ in chain))
        fresh = ranks(kind, num_samples, chain[-1][0], chain[-1][1])
        assert epoch_batches(samplers, epoch + 1) == epoch_batches(fresh, epoch + 1), chain
