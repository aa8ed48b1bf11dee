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
from paddle.io.dataloader.collate import default_collate_fn

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
dataloader_from_dataset = _ADAPTER.from_dataset


def replace_batch_sampler(dataloader: Any, batch_sampler: Any) -> Any:
    """The Trainer's copy of ``dataloader`` drawing from ``batch_sampler``, whose collate errors reach
    the training loop (:func:`carry_collate_errors`)."""
    return carry_collate_errors(_ADAPTER.replace_batch_sampler(dataloader, batch_sampler))


def carry_collate_errors(loader: Any) -> Any:
    """Make an exception in ``loader``'s collate function reach the code iterating it.

    Without workers, paddle 3 collates on a reader thread that dies on any exception in the collate
    function, and the iterator then waits forever for a batch that never comes. Here the collate
    function is wrapped: its exception is kept and the reader thread ends as at the epoch's end, and
    the iteration raises that exception once the batches made before it are served. With workers,
    paddle reports a worker's exception itself.
    """
    if getattr(loader, "num_workers", 0):
        return loader
    # a copy of a copy (a resume rebuilds the loader): wrap the user's function and class, not ours
    inner = getattr(loader.collate_fn, "carried", loader.collate_fn) or default_collate_fn
    base = getattr(type(loader), "carrier_base", type(loader))
    failures: list[BaseException] = []

    def collate(samples: Any) -> Any:
        try:
            return inner(samples)
        except BaseException as error:  # noqa: BLE001 - raised in the loop, by __iter__ below
            failures.append(error)
            return None  # paddle's reader thread stops at a None batch, as at the epoch's end

    collate.carried = inner  # type: ignore[attr-defined]
    loader.collate_fn = collate

    def __iter__(self: Any) -> Any:
        failures.clear()
        yield from base.__iter__(self)
        if failures:
            raise failures[0]

    # the loader's own class, with this __iter__: isinstance checks and its other methods are unchanged
    loader.__class__ = type(base.__name__, (base,), {"__iter__": __iter__, "__module__": base.__module__,
                                                     "__qualname__": base.__qualname__, "carrier_base": base})
    return loader


class PaddleData(DataAdapter):
    """``driver.data`` for paddle: batches already arrive on paddle's current device (the driver's),
    so they are moved only for a ``data_device`` of another place."""

    example = "a paddle.io.DataLoader"
    dataloader_args = staticmethod(get_dataloader_args)
    replace_batch_sampler = staticmethod(replace_batch_sampler)
    tensors = paddle_tensors
