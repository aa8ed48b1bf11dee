"""Swapping a paddle.io.DataLoader's sampling for a reproducible one."""
from __future__ import annotations

import numpy as np
import paddle
import pytest
from paddle.io import (BatchSampler, DataLoader, Dataset, DistributedBatchSampler, IterableDataset,
                       SubsetRandomSampler)

from fastcore_train import ReproduceBatchSampler
from fastcore_train.backends.paddle import PaddleSingleDriver
from fastcore_train.drivers import Collectives
from fastcore_train.parallel.environment import RankFacts
from fastcore_train.samplers.adapt import (find_reproducible_batch_sampler, make_reproducible_dataloader,
                                           make_unrepeated_dataloader)


class Numbers(Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, index):
        return (np.array([index], dtype="int64"),)  # paddle collates this into a list of one tensor


DATASET = Numbers()
DRIVER = PaddleSingleDriver(paddle.nn.Linear(1, 1))


def flatten(loader):
    return [int(i) for batch in loader for i in batch[0].numpy().reshape(-1)]


def test_the_users_loader_is_untouched_and_still_usable():
    user = DataLoader(DATASET, batch_size=4, shuffle=True, drop_last=True)
    batch_sampler_before, sampler_before = user.batch_sampler, user.batch_sampler.sampler
    ours = make_reproducible_dataloader(DRIVER, user, seed=3)
    assert ours is not user and user.batch_sampler is batch_sampler_before
    assert user.batch_sampler.sampler is sampler_before
    assert isinstance(ours, DataLoader) and isinstance(ours.batch_sampler, ReproduceBatchSampler)
    assert len(ours) == len(user) == 5
    assert sorted(flatten(user)) == list(range(20)) and sorted(flatten(ours)) == list(range(20))
    assert flatten(ours) != list(range(20)), "shuffle=True stays a shuffle"
    unshuffled = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_size=6))
    assert flatten(unshuffled) == list(range(20)) and len(unshuffled) == 4


def test_drop_last_is_kept():
    ours = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_size=6, drop_last=True))
    assert len(ours) == 3 and flatten(ours) == list(range(18))


def test_same_seed_same_epoch_same_order_and_epochs_differ():
    first = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_size=4, shuffle=True), seed=1)
    second = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_size=4, shuffle=True), seed=1)
    assert flatten(first) == flatten(second)
    DRIVER.data.set_epoch(first, 1)
    assert flatten(first) != flatten(second)


def test_settings_other_than_sampling_are_kept():
    def collate(samples):
        return [paddle.to_tensor(np.stack([sample[0] for sample in samples]) * 10)]

    user = DataLoader(DATASET, batch_size=5, collate_fn=collate, num_workers=0, return_list=True, timeout=0,
                      use_buffer_reader=False)
    ours = make_reproducible_dataloader(DRIVER, user)
    # the user's collate_fn, wrapped so that its errors reach the loop (paddle's reader thread would hang)
    assert ours.collate_fn.carried is collate and ours.use_buffer_reader is False
    assert flatten(ours) == [i * 10 for i in range(20)]


def test_a_custom_batch_sampler_is_replayed():
    custom = BatchSampler(sampler=SubsetRandomSampler(list(range(0, 20, 2))), batch_size=3)
    ours = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_sampler=custom))
    assert sorted(flatten(ours)) == list(range(0, 20, 2))
    assert find_reproducible_batch_sampler(DRIVER, ours) is ours.batch_sampler


def test_paddles_distributed_batch_sampler_is_read_as_plain_batching():
    """Its rank split is paddle's; the Trainer splits by itself, so it serves the whole dataset here."""
    user = DataLoader(DATASET, batch_sampler=DistributedBatchSampler(DATASET, batch_size=4, num_replicas=2, rank=1,
                                                                     shuffle=True))
    assert len(user) == 3
    ours = make_reproducible_dataloader(DRIVER, user, seed=5)
    assert len(ours) == 5 and sorted(flatten(ours)) == list(range(20))
    assert flatten(ours) != list(range(20))


def test_evaluation_share_of_each_rank_is_disjoint_and_complete():
    class TwoRanks(PaddleSingleDriver):
        def __init__(self, rank):
            super().__init__(paddle.nn.Linear(1, 1))
            self.comm = Collectives(RankFacts(rank=rank, local_rank=rank, world_size=2))

    shares = []
    for rank in (0, 1):
        share, split = make_unrepeated_dataloader(TwoRanks(rank), DataLoader(DATASET, batch_size=3))
        assert split and isinstance(share, DataLoader)
        shares.append(flatten(share))
    assert sorted(shares[0] + shares[1]) == list(range(20)) and not set(shares[0]) & set(shares[1])


class WithExtraArgument(DataLoader):
    def __init__(self, dataset, scale, **kwargs):
        super().__init__(dataset, **kwargs)
        self.scale = scale


class ForgetsItsArgument(DataLoader):
    def __init__(self, dataset, scale, batch_size=1, **kwargs):
        super().__init__(dataset, batch_size=batch_size, **kwargs)


class NoBatchSampler(DataLoader):
    def __init__(self, dataset, batch_size):
        super().__init__(dataset, batch_size=batch_size)


def test_subclasses_are_rebuilt_or_get_a_clear_error():
    rebuilt = make_reproducible_dataloader(DRIVER, WithExtraArgument(DATASET, scale=3, batch_size=4))
    assert isinstance(rebuilt, WithExtraArgument) and type(rebuilt).carrier_base is WithExtraArgument
    assert rebuilt.scale == 3
    assert sorted(flatten(rebuilt)) == list(range(20))
    with pytest.raises(TypeError, match=r"needs 'scale', which is not stored on the instance.*self.scale"):
        make_reproducible_dataloader(DRIVER, ForgetsItsArgument(DATASET, scale=3, batch_size=4))
    with pytest.raises(TypeError, match=r"NoBatchSampler.*takes no batch_sampler"):
        make_reproducible_dataloader(DRIVER, NoBatchSampler(DATASET, batch_size=4))


def test_iterable_datasets_unbatched_loaders_and_plain_iterables_are_left_as_they_are():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(np.arange(5, dtype="int64").reshape(5, 1))

    stream = DataLoader(Stream(), batch_size=2)
    assert make_reproducible_dataloader(DRIVER, stream) is stream
    unbatched = DataLoader(DATASET, batch_size=None)
    assert make_reproducible_dataloader(DRIVER, unbatched) is unbatched
    batches = [[1, 2], [3]]
    assert make_reproducible_dataloader(DRIVER, batches) is batches


def test_an_error_in_collate_fn_reaches_the_loop_instead_of_hanging():
    """paddle 3 collates on a reader thread that dies on an exception, and its iterator then waits
    forever; the Trainer's copy raises the collate function's own error after the batches made before it."""
    from fastcore_train.backends.paddle.dataloader import replace_batch_sampler

    calls = []

    def collate(samples):
        calls.append(len(samples))
        if len(calls) == 3 and failing:
            raise ValueError("bad sample in batch 3")
        return paddle.to_tensor(np.stack(samples))

    loader = paddle.io.DataLoader(list(np.arange(16, dtype="float32").reshape(8, 2)), batch_size=2, collate_fn=collate)
    ours = replace_batch_sampler(loader, paddle.io.BatchSampler(range(8), batch_size=2))
    served, failing = [], True
    with pytest.raises(ValueError, match="bad sample in batch 3"):
        for batch in ours:
            served.append(batch)
    assert len(served) == 2
    failing = False
    assert len(list(ours)) == 4  # the next epoch starts afresh
