"""A monitored value that is NaN or infinite is never "better": no top-k checkpoint, best model or
early-stop reset comes from it, and one warning names the monitor and the evaluation. Runs on every
backend (``--backend``)."""
from __future__ import annotations

import math

import pytest

from fastcore_train import CheckpointCallback, EarlyStopCallback, LoadBestModelCallback, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.reliability.conftest import messages


def scripted_metric(values):
    """A metric function giving ``values`` at successive evaluations."""
    calls = iter(values)

    def score(preds, labels):
        return {"acc": next(calls)}
    return score


def trainer_with(harness, values, callbacks, n_epochs):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    return Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                   driver=harness.driver_name, n_epochs=n_epochs, progress_bar=None,
                   evaluate_dataloaders={"dev": harness.make_dataloader(x, y, 8)},
                   metrics={"acc": scripted_metric(values)}, evaluate_input_mapping={"y": "target"},
                   callbacks=callbacks)


@pytest.mark.parametrize("bad", [math.nan, math.inf], ids=["nan", "inf"])
def test_a_nonfinite_value_saves_no_topk_checkpoint_and_warns_once(harness, tmp_path, log_records, bad):
    saver = CheckpointCallback(tmp_path, topk=1, monitor="acc")
    trainer = trainer_with(harness, [bad, 0.25, bad], [saver], n_epochs=3)
    trainer.run(num_eval_sanity_batch=0)
    assert [value for value, _ in saver.topk_saved] == [0.25]
    folders = [path.name for path in tmp_path.rglob("epoch_*")]
    assert len(folders) == 1 and folders[0].endswith("_0.25") and "nan" not in folders[0] and "inf" not in folders[0]
    warnings = [line for line in messages(log_records) if "is never better" in line]
    assert len(warnings) == 1
    assert "CheckpointCallback(topk=...): monitor 'acc' (acc#acc#dev)" in warnings[0]
    assert "evaluation after batch 4 (epoch 1)" in warnings[0]


def test_early_stop_and_best_model_ignore_a_nan(harness, tmp_path, log_records):
    stopper = EarlyStopCallback(monitor="acc", patience=1)
    best = LoadBestModelCallback(monitor="acc", save_folder=tmp_path / "best")
    trainer = trainer_with(harness, [0.5, math.nan, 0.75, math.nan], [stopper, best], n_epochs=4)
    trainer.run(num_eval_sanity_batch=0)
    # A NaN is no evaluation to count (patience=1 would have stopped after epoch 2) and never the best.
    assert stopper.tracker.best == 0.75 and stopper.wait == 0
    assert best.tracker.best == 0.75 and best.best_batches == 12
    assert trainer.cur_epoch_idx == 4
    assert sum("is never better" in line for line in messages(log_records)) == 2  # one per callback
