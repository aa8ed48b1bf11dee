"""Clear errors on misuse, and states that are plain JSON data."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fastcore_train.samplers import (
    BucketedBatchSampler,
    RandomBatchSampler,
    RandomSampler,
    ReproduceBatchSampler,
    SequentialSampler,
    SortedSampler,
)

from .helpers import KINDS, PlainBatchSampler, make, run_segments

PLAIN_TYPES = (int, float, str, bool, type(None))


def assert_plain(value):
    if isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str
            assert_plain(item)
    elif isinstance(value, list):
        for item in value:
            assert_plain(item)
    else:
        assert type(value) in PLAIN_TYPES, f"{value!r} is a {type(value).__name__}"


@pytest.mark.parametrize("kind", KINDS)
def test_states_are_plain_json_data(kind):
    _, samplers, state = run_segments(kind, 30, [(4, 2, 0.5)])
    assert_plain(state)
    assert json.loads(json.dumps(state)) == state
    expected = {"type", "epoch", "num_consumed_samples", "dataset_length", "batch_size", "num_replicas"}
    assert expected <= set(state)
    assert_plain(RandomSampler(10).state_dict())
    assert_plain(SortedSampler(3, [1, 2, 3]).state_dict())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("num_replicas, rank", [(2, 2), (2, -1), (0, 0), (1.5, 0)])
def test_bad_rank_is_refused(kind, num_replicas, rank):
    with pytest.raises(ValueError, match="num_replicas|rank"):
        make(kind, 10, 2).set_distributed(num_replicas, rank)
    with pytest.raises(ValueError, match="num_replicas|rank"):
        RandomSampler(10).set_distributed(num_replicas, rank)


def test_state_of_another_sampler_type_is_refused():
    with pytest.raises(ValueError, match="RandomBatchSampler"):
        BucketedBatchSampler(10, [1] * 10, 2).load_state_dict(RandomBatchSampler(10, 2).state_dict())
    with pytest.raises(ValueError, match="RandomSampler"):
        SequentialSampler(10).load_state_dict(RandomSampler(10).state_dict())
    wrapped = ReproduceBatchSampler(RandomSampler(10), 2).state_dict()
    with pytest.raises(ValueError, match="RandomSampler"):
        ReproduceBatchSampler(SequentialSampler(10), 2).load_state_dict(wrapped)
    with pytest.raises(ValueError, match="batch sampler"):
        ReproduceBatchSampler(PlainBatchSampler(10, 2)).load_state_dict(wrapped)


def test_state_of_another_dataset_length_is_refused():
    with pytest.raises(ValueError, match="10 samples"):
        RandomBatchSampler(11, 2).load_state_dict(RandomBatchSampler(10, 2).state_dict())
    with pytest.raises(ValueError, match="10 samples"):
        RandomSampler(11).load_state_dict(RandomSampler(10).state_dict())
    with pytest.raises(ValueError, match="10 samples"):
        ReproduceBatchSampler(RandomSampler(9), 2).load_state_dict(ReproduceBatchSampler(RandomSampler(10), 2).state_dict())


def test_more_consumed_batches_than_handed_out_is_refused():
    sampler = RandomBatchSampler(10, 2)
    with pytest.raises(ValueError, match="no iteration"):
        sampler.state_dict(num_consumed_batches=1)
    iterator = iter(sampler)
    next(iterator)
    with pytest.raises(ValueError, match="handed out 1"):
        sampler.state_dict(num_consumed_batches=2)


def test_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        RandomBatchSampler(10, 0)
    with pytest.raises(ValueError, match="batch_size is required"):
        ReproduceBatchSampler(RandomSampler(10))
    with pytest.raises(TypeError, match="already resumable"):
        ReproduceBatchSampler(RandomBatchSampler(10, 2))
    with pytest.raises(ValueError, match="one value per sample"):
        SortedSampler(10, [1, 2, 3])
    with pytest.raises(ValueError, match="seed"):
        RandomSampler(10, seed=-1)
    with pytest.raises(ValueError, match="epoch"):
        RandomSampler(10).set_epoch(-1)
    with pytest.raises(TypeError, match="sized"):
        RandomSampler(object())
    with pytest.raises(TypeError, match="must yield integer indices or lists of them"):
        list(ReproduceBatchSampler(iter(["a", "b"]), batch_size=2))
    with pytest.raises(ValueError, match="batch_size is required"):
        ReproduceBatchSampler([3, 1, 2])  # an index sampler: single indices, no batch size to read


@pytest.mark.also_per_backend  # proves something only where the framework is installed
def test_samplers_import_no_framework():
    code = ("import sys, fastcore_train.samplers; "
            "print(','.join(m for m in ('torch', 'paddle', 'jittor', 'oneflow') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""
