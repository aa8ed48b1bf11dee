"""Swapping a dataloader's sampling for a reproducible one: the decision, written once.

A backend only reports what its dataloader samples (:class:`DataLoaderArgs`, from
``driver.data.dataloader_args``) and rebuilds a dataloader around a new batch sampler
(``driver.data.replace_batch_sampler``); which reproducible sampler to use is decided here, the same
way for every framework.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Optional

from fastcore_train.samplers.base import ReproducibleBatchSampler, ReproducibleSampler
from fastcore_train.samplers.batch_samplers import ReproduceBatchSampler
from fastcore_train.samplers.index_samplers import RandomSampler
from fastcore_train.samplers.unrepeated import UnrepeatedSequentialSampler


@dataclass
class DataLoaderArgs:
    """A backend's description of how a dataloader samples.

    ``sampler_kind``: ``"random"`` (the framework's plain shuffling sampler), ``"sequential"``,
    or ``"custom"`` (anything else, including our own samplers). ``default_batching``: the batch
    sampler is the framework's plain "take ``batch_size`` indices from ``sampler``" one.
    """

    dataset: Any
    batch_size: Optional[int]
    drop_last: bool
    sampler: Any
    batch_sampler: Any
    sampler_kind: str
    default_batching: bool


def choose_batch_sampler(args: DataLoaderArgs, seed: int) -> ReproducibleBatchSampler:
    """The reproducible batch sampler that serves the same data as ``args`` describes."""
    if isinstance(args.batch_sampler, ReproducibleBatchSampler):
        return copy.deepcopy(args.batch_sampler)  # the user's dataloader keeps its own
    if args.default_batching:
        if isinstance(args.sampler, ReproducibleSampler):
            return ReproduceBatchSampler(copy.deepcopy(args.sampler), args.batch_size, args.drop_last)
        if args.sampler_kind in ("random", "sequential"):
            sampler = RandomSampler(args.dataset, shuffle=args.sampler_kind == "random", seed=seed)
            return ReproduceBatchSampler(sampler, args.batch_size, args.drop_last)
    # Any other (batch) sampler: replay its order, recorded epoch by epoch.
    return ReproduceBatchSampler(args.batch_sampler, args.batch_size, args.drop_last)


def make_reproducible_dataloader(driver: Any, dataloader: Any, seed: int = 0, num_replicas: int = 1,
                                 rank: int = 0, pad: bool = True) -> Any:
    """A copy of ``dataloader`` whose position can be saved and restored exactly.

    Returns ``dataloader`` itself when its kind cannot take another batch sampler (e.g. an
    iterable-style dataset); resuming such a loader mid-epoch skips batches instead.
    """
    args = driver.data.dataloader_args(dataloader)
    if args is None:
        return dataloader
    batch_sampler = choose_batch_sampler(args, seed)
    if num_replicas > 1:
        batch_sampler.set_distributed(num_replicas, rank, pad=pad)
    return driver.data.replace_batch_sampler(dataloader, batch_sampler)


def find_reproducible_batch_sampler(driver: Any, dataloader: Any) -> Optional[ReproducibleBatchSampler]:
    batch_sampler = driver.data.batch_sampler(dataloader)
    return batch_sampler if isinstance(batch_sampler, ReproducibleBatchSampler) else None


class BatchedIndices:
    """Batches of ``batch_size`` consecutive indices from ``sampler`` (a plain batch sampler)."""

    def __init__(self, sampler: Any, batch_size: int, drop_last: bool = False) -> None:
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        full, rest = divmod(len(self.sampler), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)


def ranks_share_batches(driver: Any) -> bool:
    """Whether several ranks compute on the same batches (:meth:`Driver.data_shard` has fewer
    shards than ranks): then every rank evaluates and predicts the whole dataloader."""
    return driver.data_shard()[0] != driver.comm.world_size


def make_unrepeated_dataloader(driver: Any, dataloader: Any) -> tuple[Any, bool]:
    """This rank's disjoint share of an evaluation dataloader (no sample padded or repeated).

    Returns ``(dataloader, split)``; ``split`` is False when the loader could not be divided, in
    which case every rank evaluates all of it and results need no cross-rank aggregation.
    """
    share = unrepeated_share(driver, dataloader)
    return (dataloader, False) if share is None else (share[0], True)


def unrepeated_share(driver: Any, dataloader: Any) -> Optional[tuple[Any, list[int]]]:
    """This rank's share of ``dataloader`` in dataset order, and the dataset indices it serves (in
    the order it serves them); None when the loader cannot take another batch sampler."""
    return _in_dataset_order(driver, dataloader, driver.comm.world_size, driver.comm.rank)


def whole_copy(driver: Any, dataloader: Any) -> Any:
    """A copy of ``dataloader`` serving all of it in dataset order (every rank the same), or
    ``dataloader`` itself when it cannot take another batch sampler."""
    copy = _in_dataset_order(driver, dataloader, 1, 0)
    return dataloader if copy is None else copy[0]


def _in_dataset_order(driver: Any, dataloader: Any, shares: int, share: int) -> Optional[tuple[Any, list[int]]]:
    args = driver.data.dataloader_args(dataloader)
    if args is None or not args.default_batching or not args.batch_size:
        return None
    sampler = UnrepeatedSequentialSampler(args.dataset)
    sampler.set_distributed(shares, share)
    batches = BatchedIndices(sampler, args.batch_size, drop_last=False)
    return driver.data.replace_batch_sampler(dataloader, batches), list(sampler)
