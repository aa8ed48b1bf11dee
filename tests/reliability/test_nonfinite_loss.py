"""A run whose loss turns NaN stops by default (``Trainer(nan_guard=True)``: the loss is read every 50
batches and at each epoch's last batch) with an error naming the batch; ``nan_guard=False`` trains
on. Runs on every backend (``--backend``)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fastcore_train import CheckpointCallback, NanGuardCallback, NonFiniteLossError, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data


def nan_sgd(harness, model):
    """SGD with a NaN learning rate (oneflow refuses one when the optimizer is built: set it after)."""
    try:
        return harness.make_sgd(model, math.nan)
    except AssertionError:
        optimizer = harness.make_sgd(model, 0.1)
        for group in optimizer.param_groups:
            group["lr"] = math.nan
        return optimizer


def nan_lr_trainer(harness, **kwargs):
    x, y = make_data(32)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), nan_sgd(harness, model),
                      driver=harness.driver_name, n_epochs=2, progress_bar=None, **kwargs)
    return trainer, model


def test_lr_nan_stops_at_the_first_checked_batch_by_default(harness, tmp_path):
    """The default guard reads the loss after its batch's step (no wait for the device), names that
    batch, saves nothing and stops before any other callback sees the batch's end (a checkpoint)."""
    saving = CheckpointCallback(tmp_path, every_n_batches=8)
    trainer, _ = nan_lr_trainer(harness, callbacks=[saving])
    if trainer.driver.data.reading_changes_results:  # jittor: no default guard (a read changes rounding)
        assert not any(isinstance(cb, NanGuardCallback) for cb in trainer.callback_manager.callbacks)
        trainer, _ = nan_lr_trainer(harness, nan_guard=50)  # an int turns it on there too, read before backward
        with pytest.raises(NonFiniteLossError, match=r"The training loss is nan at epoch 1, batch 8 of the epoch "
                                                     r"\(batch 8 overall\).*checked every 50 batches and at each "
                                                     r"epoch's last one \(the last, batch 1, was finite\)"):
            trainer.run(num_eval_sanity_batch=0)
        assert trainer.global_forward_batches == 7
        return
    with pytest.raises(NonFiniteLossError, match=r"The training loss is nan at epoch 1, batch 8 of the epoch \(batch 8 "
                                                 r"overall\)\. It was read after that batch's optimizer step.*nothing "
                                                 r"was saved"):
        trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 8
    assert not [path for path in tmp_path.rglob("*batch_8*")], "a checkpoint saw the batch the guard stopped at"


def test_a_deferred_guard_cannot_save_to_a_folder(tmp_path):
    with pytest.raises(ValueError, match="cannot save them to folder"):
        NanGuardCallback(tmp_path, deferred=True)


def test_a_cadence_of_1_stops_at_the_first_nan_batch(harness):
    trainer, _ = nan_lr_trainer(harness, nan_guard=1)
    with pytest.raises(NonFiniteLossError, match=r"epoch 1, batch 2 of the epoch .*weights are those after the last "
                                                 r"checked finite step"):
        trainer.run(num_eval_sanity_batch=0)


def test_nan_guard_false_trains_on(harness):
    trainer, model = nan_lr_trainer(harness, nan_guard=False)
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 16
    assert all(np.isnan(value).all() for value in harness.get_weights(model).values())


def test_your_own_guard_replaces_the_default(harness, tmp_path):
    guard = NanGuardCallback(folder=tmp_path)
    trainer, _ = nan_lr_trainer(harness, callbacks=[guard])
    assert [cb for cb in trainer.callback_manager.callbacks if isinstance(cb, NanGuardCallback)] == [guard]
    with pytest.raises(NonFiniteLossError, match="batch 2 of the epoch"):
        trainer.run(num_eval_sanity_batch=0)


@pytest.mark.parametrize("value", [0, -1, "yes", 2.5])
def test_a_wrong_nan_guard_is_refused(harness, value):
    with pytest.raises(ValueError, match=r"nan_guard must be True"):
        nan_lr_trainer(harness, nan_guard=value)
