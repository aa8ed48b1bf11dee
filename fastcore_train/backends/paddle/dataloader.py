"""Reading how a ``paddle.io.DataLoader`` samples, rebuilding it around another batch sampler, and
the driver's data layer (:class:`PaddleData`).

A paddle DataLoader draws index lists from its ``batch_sampler``: a ``paddle.io.BatchSampler``
over ``RandomSampler``/``SequenceSampler`` when built with ``batch_size``/``shuffle``, or the one
the user passed. ``DistributedBatchSampler`` (paddle's own rank split) is read as the plain
shuffled or sequential batching it performs, since the Trainer splits data across ranks itself.
The logic shared with torch and oneflow is
:class:`fastcore_train.samplers.dataloader_adapter.DataLoaderAdapter`; what paddle does its own
way is overridden below.
"""
from __future__ import annotations

from typing import Any

from paddle.io import BatchSampler, DataLoader, DistributedBatchSampler, IterableDataset, RandomSampler, SequenceSampler

from fastcore_train.backends.paddle import tensors as paddle_tensors
from fastcore_train.drivers.data import DataAdapter
from fastcore_train.samplers.adapt import DataLoaderArgs
from fastcore_train.samplers.dataloader_adapter import DataLoaderAdapter


class _PaddleAdapter(DataLoaderAdapter):
    """paddle's loaders: no ``sampler`` attribute, seeded shuffling, ``DistributedBatchSampler``."""

    def is_plain_shuffle(self, sampler: Any) -> bool:
        return super().is_plain_shuffle(sampler) and sampler.generator is None

    def index_sampler(self, dataloader: Any, batch_sampler: Any, default_batching: bool) -> Any:
        return getattr(batch_sampler, "sampler", None)

    def describe(self, dataloader: Any, batch_sampler: Any) -> DataLoaderArgs:
        if type(batch_sampler) is not DistributedBatchSampler:
            return super().describe(dataloader, batch_sampler)
        return DataLoaderArgs(
            dataset=batch_sampler.dataset, batch_size=batch_sampler.batch_size,
            drop_last=batch_sampler.drop_last, sampler=None, batch_sampler=batch_sampler,
            sampler_kind="random" if batch_sampler.shuffle else "sequential", default_batching=True)


_ADAPTER = _PaddleAdapter(
    dataloader=DataLoader, iterable_dataset=IterableDataset, batch_sampler=BatchSampler,
    random_sampler=RandomSampler, sequential_sampler=SequenceSampler, dataloader_path="paddle.io.DataLoader",
    sampling=frozenset({"batch_sampler", "batch_size", "shuffle", "drop_last"}),
    stored_as={"persistent_workers": "_persistent_workers"})

get_dataloader_args = _ADAPTER.get_dataloader_args
replace_batch_sampler = _ADAPTER.replace_batch_sampler
dataloader_from_dataset = _ADAPTER.from_dataset


class PaddleData(DataAdapter):
    """``driver.data`` for paddle: batches already arrive on paddle's current device (the driver's),
    so they are moved only for a ``data_device`` of another place."""

    example = "a paddle.io.DataLoader"
    dataloader_args = staticmethod(get_dataloader_args)
    replace_batch_sampler = staticmethod(replace_batch_sampler)
    tensors = paddle_tensors
