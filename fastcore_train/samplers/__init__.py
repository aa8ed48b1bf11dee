"""Samplers that make training resumable mid-epoch, with numpy only (no deep-learning framework).

Each sampler has a deterministic global order of dataset indices per epoch, built from
``(seed, epoch, parameters)``. A state records how many leading entries of it are consumed, so a
run stopped anywhere resumes exactly, even with another batch size or number of ranks.

Typical use by a trainer::

    batch_sampler.load_state_dict(saved)          # only when resuming
    for epoch in range(saved_epoch_or_0, num_epochs):
        batch_sampler.set_epoch(epoch)            # same epoch as the state: keeps its offset
        for used, batch in enumerate(loader, 1):  # ``used`` counts batches of this iteration
            ...
            saved = batch_sampler.state_dict(num_consumed_batches=used)
"""
from fastcore_train.samplers.base import ReproducibleBatchSampler, ReproducibleSampler
from fastcore_train.samplers.base import SamplerUsageError
from fastcore_train.samplers.batch_samplers import BucketedBatchSampler, RandomBatchSampler, ReproduceBatchSampler
from fastcore_train.samplers.index_samplers import RandomSampler, SequentialSampler, SortedSampler
from fastcore_train.samplers.unrepeated import (
    UnrepeatedRandomSampler,
    UnrepeatedSampler,
    UnrepeatedSequentialSampler,
    UnrepeatedSortedSampler,
)

__all__ = [
    "BucketedBatchSampler",
    "RandomBatchSampler",
    "RandomSampler",
    "ReproduceBatchSampler",
    "ReproducibleBatchSampler",
    "ReproducibleSampler",
    "SamplerUsageError",
    "SequentialSampler",
    "SortedSampler",
    "UnrepeatedRandomSampler",
    "UnrepeatedSampler",
    "UnrepeatedSequentialSampler",
    "UnrepeatedSortedSampler",
]
