"""Reading how a ``jittor.dataset.Dataset`` samples, a copy of it drawing from our batch sampler, and
the driver's data layer (:class:`JittorData`).

A jittor Dataset is its own loader: ``set_attrs(batch_size=..., shuffle=...)`` configures it,
``len()`` counts batches and, under MPI, ``batch_size`` is the global batch that jittor splits
across ranks itself. The Trainer splits data across ranks with its own samplers, so the copy built
here iterates the batch sampler's index lists directly (collating with the dataset's own
``collate_batch`` and ``to_jittor``), bypassing jittor's shuffling and MPI splitting; where the
dataset has ``num_workers``, that many worker processes of ours load the batches
(:mod:`.batch_workers`, which says why not jittor's own). The user's dataset is left untouched.
"""
from __future__ import annotations

import copy
from typing import Any, Iterator, Optional

from jittor.dataset import Dataset

from fastcore_train.backends.jittor import tensors as jittor_tensors
from fastcore_train.backends.jittor.batch_workers import BatchWorkers, workers_of
from fastcore_train.drivers.data import DataAdapter
from fastcore_train.samplers.adapt import BatchedIndices, DataLoaderArgs

#: Attributes of a Dataset tied to its worker processes, which a copy must not share.
_WORKER_STATE = ("workers", "index_list", "idqueue", "idqueue_lock", "gid", "gidc", "num_idle",
                 "num_idle_c", "index_list_numpy")


def num_samples(dataset: Dataset) -> int:
    """Samples in a jittor Dataset: ``total_len``, or the ``__len__`` a subclass defines (as jittor reads it)."""
    if dataset.total_len is not None:
        return int(dataset.total_len)
    if type(dataset).__len__ is not Dataset.__len__:
        return len(dataset)
    raise TypeError(f"The jittor dataset {type(dataset).__name__} does not say how many samples it has: call "
                    "self.set_attrs(total_len=N) in its __init__ (or define __len__).")


class SampledDataset:
    """A copy of a jittor Dataset yielding the batches of ``batch_sampler`` (lists of indices).

    ``len()`` counts this rank's batches; ``dataset`` is the copy (a real jittor Dataset). With
    the dataset's ``num_workers``, worker processes load the batches in the sampler's order; they
    are started by the first epoch, kept for the next ones (stopped when an epoch is left midway)
    and stopped by :meth:`close`, which the Trainer calls when ``run()`` ends.
    """

    def __init__(self, dataset: Dataset, batch_sampler: Any) -> None:
        self.dataset = dataset
        self.batch_sampler = batch_sampler
        self._workers: Optional[BatchWorkers] = None

    @property
    def num_workers(self) -> int:
        return workers_of(self.dataset)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        dataset = self.dataset
        count = self.num_workers
        if count:
            if self._workers is None or self._workers.num_workers != count:
                self.close()
                self._workers = BatchWorkers(dataset, count)
            return self._workers.batches(self.batch_sampler, dataset.to_jittor)
        return self._in_process()

    def _in_process(self) -> Iterator[Any]:
        dataset = self.dataset
        for indices in self.batch_sampler:
            samples = [dataset[int(index)] for index in indices]
            yield dataset.to_jittor(dataset.collate_batch(samples))

    def close(self) -> None:
        """Stop the worker processes, if any (the next epoch starts new ones)."""
        if self._workers is not None:
            self._workers.close()


def _copy_dataset(dataset: Dataset) -> Dataset:
    """A shallow copy (data shared, not duplicated) with no worker processes of its own."""
    duplicate = copy.copy(dataset)
    for name in _WORKER_STATE:
        duplicate.__dict__.pop(name, None)
    duplicate.dataset = duplicate
    return duplicate


def get_dataloader_args(dataloader: Any) -> Optional[DataLoaderArgs]:
    """How a jittor Dataset (or our copy of one) samples; None for anything else."""
    if isinstance(dataloader, SampledDataset):
        sampler = dataloader.batch_sampler
        inner = getattr(sampler, "sampler", None)
        default = isinstance(sampler, BatchedIndices)
        return DataLoaderArgs(dataset=num_samples(dataloader.dataset), batch_size=getattr(sampler, "batch_size", None),
                              drop_last=bool(getattr(sampler, "drop_last", False)), sampler=inner,
                              batch_sampler=sampler, sampler_kind="custom", default_batching=default)
    if not isinstance(dataloader, Dataset) or not dataloader.batch_size:
        return None
    length = num_samples(dataloader)
    if dataloader.sampler is not None:
        sampler, kind = dataloader.sampler, "custom"
    else:
        sampler, kind = range(length), "random" if dataloader.shuffle else "sequential"
    return DataLoaderArgs(dataset=length, batch_size=int(dataloader.batch_size), drop_last=bool(dataloader.drop_last),
                          sampler=sampler, batch_sampler=BatchedIndices(sampler, int(dataloader.batch_size),
                                                                        bool(dataloader.drop_last)),
                          sampler_kind=kind, default_batching=True)


def replace_batch_sampler(dataloader: Any, batch_sampler: Any) -> SampledDataset:
    """A copy of ``dataloader`` (a jittor Dataset, or our copy of one) drawing from ``batch_sampler``."""
    if isinstance(dataloader, SampledDataset):
        return SampledDataset(dataloader.dataset, batch_sampler)
    if not isinstance(dataloader, Dataset):
        raise TypeError(f"Cannot give a {type(dataloader).__name__} another batch sampler: pass a jittor.dataset.Dataset.")
    return SampledDataset(_copy_dataset(dataloader), batch_sampler)


class JittorData(DataAdapter):
    """``driver.data`` for jittor: Vars live wherever ``jt.flags.use_cuda`` says, so batches are
    never moved."""

    def release(self, dataloader: Any) -> None:
        if isinstance(dataloader, SampledDataset):
            dataloader.close()

    example = "a jittor.dataset.Dataset with set_attrs(batch_size=...)"
    copy_for_evaluation = True  # jittor's own workers would outlive run(); ours stop with it
    reading_changes_results = True  # jittor is lazy: a read runs the pending graph on its own
    dataloader_args = staticmethod(get_dataloader_args)
    replace_batch_sampler = staticmethod(replace_batch_sampler)
    tensors = jittor_tensors
