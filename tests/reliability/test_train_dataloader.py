"""A training dataloader that would train nothing, in some epoch or all, is an error, not a silent no-op.

Runs on every backend (``--backend``): the checks are the controller's, before or between epochs.
"""
from __future__ import annotations

import pytest

from fastcore_train import Trainer
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import make_trainer


def trainer_on(harness, loader, **kwargs):
    model = harness.make_model(initial_weights())
    kwargs.setdefault("progress_bar", None)
    return Trainer(model, loader, harness.make_sgd(model, 0.1), driver=harness.driver_name, device="cpu", **kwargs)


class OneShot:
    """Iterable but not an iterator: ``__iter__`` hands out the same, already started, pass."""

    def __init__(self, loader):
        self.source = iter(list(loader))  # a python iterator: paddle's own raise an error once exhausted

    def __iter__(self):
        return self.source


class Nothing:
    """An unsized iterable that yields no batch."""

    def __iter__(self):
        return iter(())


def test_a_generator_with_several_epochs_is_refused_when_the_trainer_is_built(harness):
    x, y = make_data(16)
    loader = harness.make_dataloader(x, y, 8)
    with pytest.raises(ValueError, match=r"one-shot iterator \(generator.*epochs 2 to 3 would train nothing"):
        trainer_on(harness, (batch for batch in loader), n_epochs=3)


def test_a_generator_for_one_epoch_or_bounded_by_n_batches_trains(harness):
    x, y = make_data(16)
    one_epoch = trainer_on(harness, (batch for batch in harness.make_dataloader(x, y, 8)), n_epochs=1)
    one_epoch.run(num_eval_sanity_batch=0)
    assert one_epoch.global_forward_batches == 2
    bounded = trainer_on(harness, (batch for batch in harness.make_dataloader(x, y, 4)), n_batches=3)
    bounded.run(num_eval_sanity_batch=0)
    assert bounded.global_forward_batches == 3


def test_a_one_shot_iterable_fails_at_the_epoch_it_runs_dry(harness):
    x, y = make_data(16)
    trainer = trainer_on(harness, OneShot(harness.make_dataloader(x, y, 8)), n_epochs=3)
    with pytest.raises(ValueError, match=r"no batch in epoch 2, after 2 batch\(es\).*one-shot iterable"):
        trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 2  # epoch 1 trained


def test_an_empty_dataloader_is_refused_when_the_trainer_is_built(harness):
    x, y = make_data(16)
    with pytest.raises(ValueError, match=r"train_dataloader has no batch \(len\(\) is 0"):
        make_trainer(harness, harness.make_model(initial_weights()), x[:0], y[:0])


def test_an_unsized_iterable_that_yields_nothing_names_the_epoch(harness):
    trainer = trainer_on(harness, Nothing(), n_epochs=2)
    with pytest.raises(ValueError, match=r"no batch in epoch 1: it is empty"):
        trainer.run(num_eval_sanity_batch=0)
