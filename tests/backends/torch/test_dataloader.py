"""Swapping a torch DataLoader's sampling for a reproducible one."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, SubsetRandomSampler, TensorDataset

from fastcore_train import Event, ReproduceBatchSampler, Trainer
from fastcore_train.backends.torch import TorchSingleDriver
from fastcore_train.samplers.adapt import find_reproducible_batch_sampler, make_reproducible_dataloader

DATASET = TensorDataset(torch.arange(20))
DRIVER = TorchSingleDriver(torch.nn.Linear(1, 1))


def flatten(loader):
    return [int(i) for batch in loader for i in batch[0]]


def test_the_users_loader_is_untouched_and_still_usable():
    user = DataLoader(DATASET, batch_size=4, shuffle=True, drop_last=True)
    sampler_before, batch_sampler_before = user.sampler, user.batch_sampler
    ours = make_reproducible_dataloader(DRIVER, user, seed=3)
    assert ours is not user and user.sampler is sampler_before and user.batch_sampler is batch_sampler_before
    assert isinstance(ours.batch_sampler, ReproduceBatchSampler)
    assert len(ours) == len(user) == 5
    assert sorted(flatten(user)) == list(range(20)) and sorted(flatten(ours)) == list(range(20))
    assert flatten(ours) != list(range(20)), "shuffle=True stays a shuffle"
    unshuffled = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_size=6))
    assert flatten(unshuffled) == list(range(20)) and len(unshuffled) == 4


def test_same_seed_same_epoch_same_order_and_epochs_differ():
    first = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_size=4, shuffle=True), seed=1)
    second = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_size=4, shuffle=True), seed=1)
    assert flatten(first) == flatten(second)
    DRIVER.data.set_epoch(first, 1)
    assert flatten(first) != flatten(second)


def test_settings_other_than_sampling_are_kept():
    def collate(samples):
        return [torch.stack([s[0] for s in samples]) * 10]

    user = DataLoader(DATASET, batch_size=5, collate_fn=collate, num_workers=0, pin_memory=False, timeout=0)
    ours = make_reproducible_dataloader(DRIVER, user)
    assert ours.collate_fn is collate
    assert flatten(ours) == [i * 10 for i in range(20)]


def test_a_custom_batch_sampler_is_replayed():
    custom = BatchSampler(SubsetRandomSampler(list(range(0, 20, 2)), generator=torch.Generator().manual_seed(0)),
                          batch_size=3, drop_last=False)
    ours = make_reproducible_dataloader(DRIVER, DataLoader(DATASET, batch_sampler=custom))
    assert sorted(flatten(ours)) == list(range(0, 20, 2))
    assert find_reproducible_batch_sampler(DRIVER, ours) is ours.batch_sampler


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
    assert type(rebuilt) is WithExtraArgument and rebuilt.scale == 3
    assert sorted(flatten(rebuilt)) == list(range(20))
    with pytest.raises(TypeError, match=r"needs 'scale', which is not stored on the instance.*self.scale"):
        make_reproducible_dataloader(DRIVER, ForgetsItsArgument(DATASET, scale=3, batch_size=4))
    with pytest.raises(TypeError, match=r"NoBatchSampler.*takes no batch_sampler"):
        make_reproducible_dataloader(DRIVER, NoBatchSampler(DATASET, batch_size=4))


def test_iterable_datasets_and_plain_iterables_are_left_as_they_are():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(5))

    stream = DataLoader(Stream(), batch_size=2)
    assert make_reproducible_dataloader(DRIVER, stream) is stream
    batches = [[1, 2], [3]]
    assert make_reproducible_dataloader(DRIVER, batches) is batches


class _Squares(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(1, 1)

    def train_step(self, x):
        return {"loss": self.fc(x).pow(2).mean()}


def test_a_resumed_epoch_ends_where_it_should_when_the_loader_prefetches_its_last_batches(tmp_path):
    """With workers, iter() of a torch DataLoader draws its first batches at once: a resumed epoch's
    two remaining batches are then all drawn before the first is trained. The epoch's length must
    still be read as 3 trained + 2 remaining (a rank that read the next epoch's length instead
    waited forever for the others at the end of the epoch, in data parallel)."""
    data = [{"x": torch.tensor([float(i)])} for i in range(20)]

    def trainer(seen: list, **options):
        model = _Squares()
        loader = DataLoader(data, batch_size=4, shuffle=True, num_workers=1, prefetch_factor=2)
        built = Trainer(model=model, driver="torch", device="cpu", train_dataloader=loader, progress_bar=None,
                        optimizers=torch.optim.SGD(model.parameters(), lr=0.01), **options)
        built.add_callback_fn(Event.on_train_batch_end(), lambda trainer: seen.append(
            (trainer.state.batch_idx_in_epoch, trainer.state.num_batches_per_epoch)))
        return built

    before, seen = [], []
    first = trainer(before, n_epochs=1, n_batches=3)
    first.run()
    first.save_checkpoint(tmp_path / "ckpt")
    first.wait_for_checkpoint()
    assert before == [(1, 5), (2, 5), (3, 5)]
    trainer(seen, n_epochs=1).run(resume_from=tmp_path / "ckpt")
    assert seen == [(4, 5), (5, 5)]
