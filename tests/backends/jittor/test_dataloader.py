"""A jittor Dataset is its own loader: the Trainer's samplers drive a copy of it, the user's one
stays as it was."""
from __future__ import annotations

import numpy as np
import pytest
from jittor.dataset import Dataset

from fastcore_train.backends.jittor import JittorSingleDriver
from fastcore_train.backends.jittor.dataloader import SampledDataset, num_samples
from fastcore_train.samplers.adapt import make_reproducible_dataloader
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.harnesses.jittor import Harness

HARNESS = Harness()


class SizedByLen(Dataset):
    """A dataset that says its size with ``__len__`` instead of ``total_len``."""

    def __len__(self):
        return 10

    def __getitem__(self, index):
        return np.float32(index)


def driver():
    return JittorSingleDriver(HARNESS.make_model(initial_weights()))


def test_the_copy_follows_our_sampler_and_the_users_dataset_is_untouched():
    x, y = make_data(20)
    users = HARNESS.make_dataloader(x, y, 6, shuffle=True, with_index=True)
    before = dict(batch_size=users.batch_size, shuffle=users.shuffle, drop_last=users.drop_last)
    copy = make_reproducible_dataloader(driver(), users, seed=3)
    assert isinstance(copy, SampledDataset) and copy.dataset is not users and len(copy) == 4
    served = [HARNESS.indices_of(batch) for batch in copy]
    assert [len(b) for b in served] == [6, 6, 6, 2] and sorted(sum(served, [])) == list(range(20))
    assert served != [list(range(i, min(i + 6, 20))) for i in range(0, 20, 6)], "shuffled"
    assert dict(batch_size=users.batch_size, shuffle=users.shuffle, drop_last=users.drop_last) == before
    assert sum(len(HARNESS.indices_of(batch)) for batch in users) == 20, "the user's dataset still loads"


def test_sequential_and_drop_last_are_kept():
    x, y = make_data(20)
    users = HARNESS.make_dataloader(x, y, 6, with_index=True)
    users.set_attrs(drop_last=True)
    copy = make_reproducible_dataloader(driver(), users)
    assert [HARNESS.indices_of(batch) for batch in copy] == [list(range(i, i + 6)) for i in (0, 6, 12)]


def test_the_number_of_samples_comes_from_total_len_or_len():
    assert num_samples(SizedByLen().set_attrs(batch_size=4)) == 10
    x, y = make_data(7)
    assert num_samples(HARNESS.make_dataloader(x, y, 2)) == 7

    class Unsized(Dataset):
        def __getitem__(self, index):
            return index

    with pytest.raises(TypeError, match="set_attrs\\(total_len=N\\)"):
        num_samples(Unsized())
