"""Reading how a torch DataLoader samples, and rebuilding it around another batch sampler.

The logic is :class:`fastcore_train.samplers.dataloader_adapter.DataLoaderAdapter`, shared with
paddle and oneflow; this module names torch's classes for it.
"""
from __future__ import annotations

from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

from fastcore_train.samplers.dataloader_adapter import DataLoaderAdapter

_ADAPTER = DataLoaderAdapter(
    dataloader=DataLoader, iterable_dataset=IterableDataset, batch_sampler=BatchSampler,
    random_sampler=RandomSampler, sequential_sampler=SequentialSampler,
    dataloader_path="torch.utils.data.DataLoader",
    sampling=frozenset({"batch_size", "shuffle", "sampler", "batch_sampler", "drop_last"}),
    worker_only=("prefetch_factor",))

get_dataloader_args = _ADAPTER.get_dataloader_args
replace_batch_sampler = _ADAPTER.replace_batch_sampler
