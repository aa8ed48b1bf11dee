"""Reading how a ``oneflow.utils.data.DataLoader`` samples, rebuilding it around another batch
sampler (the user's loader is left untouched), and the driver's data layer (:class:`OneflowData`).

oneflow's DataLoader mirrors torch's, so the logic is the shared
:class:`fastcore_train.samplers.dataloader_adapter.DataLoaderAdapter`; only oneflow's classes are
named here.
"""
from __future__ import annotations


from oneflow.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

from fastcore_train.backends.oneflow import tensors as oneflow_tensors
from fastcore_train.drivers.data import DataAdapter
from fastcore_train.samplers.dataloader_adapter import DataLoaderAdapter

#: oneflow refuses worker settings without worker processes, so those are dropped for num_workers=0.
_ADAPTER = DataLoaderAdapter(dataloader=DataLoader, iterable_dataset=IterableDataset, batch_sampler=BatchSampler,
                             random_sampler=RandomSampler, sequential_sampler=SequentialSampler,
                             dataloader_path="oneflow.utils.data.DataLoader",
                             sampling=frozenset({"batch_size", "shuffle", "sampler", "batch_sampler", "drop_last"}),
                             worker_only=("prefetch_factor", "persistent_workers"))
get_dataloader_args = _ADAPTER.get_dataloader_args
replace_batch_sampler = _ADAPTER.replace_batch_sampler
dataloader_from_dataset = _ADAPTER.from_dataset


class OneflowData(DataAdapter):
    """``driver.data`` for oneflow: loaders read and rebuilt by the shared adapter, batches moved
    with ``Tensor.to(device)``."""

    example = "a oneflow.utils.data.DataLoader"
    dataloader_args = staticmethod(get_dataloader_args)
    replace_batch_sampler = staticmethod(replace_batch_sampler)
    tensors = oneflow_tensors
