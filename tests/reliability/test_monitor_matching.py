"""A monitor that names no evaluation result is an error at the first evaluation, listing the names
there are (it would otherwise never save a top-k checkpoint nor stop early). Runs on every backend."""
from __future__ import annotations

import pytest

from fastcore_train import (Accuracy, CheckpointCallback, EarlyStopCallback, LoadBestModelCallback,
                            MoreEvaluateCallback, Trainer)
from fastcore_train.callbacks.monitor_mixin import MonitorNotFoundError
from tests.conformance.harnesses.base import initial_weights, make_data


def trainer_with(harness, callbacks, monitor=None, n_epochs=2):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    return Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                   driver=harness.driver_name, n_epochs=n_epochs, progress_bar=None, monitor=monitor,
                   evaluate_dataloaders={"dev": harness.make_dataloader(x, y, 8)}, metrics={"acc": Accuracy()},
                   evaluate_input_mapping={"y": "target"}, callbacks=callbacks)


@pytest.mark.parametrize("make_callback, owner", [
    (lambda folder: CheckpointCallback(folder, topk=1), "CheckpointCallback"),
    (lambda folder: EarlyStopCallback(patience=1), "EarlyStopCallback"),
    (lambda folder: LoadBestModelCallback(), "LoadBestModelCallback"),
], ids=["topk", "early_stop", "load_best"])
def test_an_unmatched_monitor_fails_at_the_first_evaluation(harness, tmp_path, make_callback, owner):
    callback = make_callback(tmp_path)
    trainer = trainer_with(harness, [callback], monitor="accuracy")
    with pytest.raises(MonitorNotFoundError, match=rf"{owner}.*monitor 'accuracy' matches none of the evaluation "
                                                   rf"results \['acc#acc#dev'\]"):
        trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4  # the first evaluation, at the end of epoch 1
    if isinstance(callback, LoadBestModelCallback):  # nothing was kept: its temporary folder is gone too
        assert not callback.save_folder.exists()
    assert isinstance(MonitorNotFoundError("x"), ValueError)


def test_an_unmatched_watch_monitor_of_more_evaluate_fails_too(harness, tmp_path):
    x, y = make_data(8)
    extra = MoreEvaluateCallback(harness.make_dataloader(x, y, 8), {"acc": Accuracy()}, watch_monitor="f1",
                                 input_mapping={"y": "target"})
    trainer = trainer_with(harness, [extra])
    with pytest.raises(MonitorNotFoundError, match=r"MoreEvaluateCallback\(watch_monitor=...\): monitor 'f1'"):
        trainer.run(num_eval_sanity_batch=0)


@pytest.mark.parametrize("monitor", ["acc", "acc#acc", "acc#acc#dev"])
def test_exact_and_leading_part_monitors_still_match(harness, tmp_path, monitor):
    saver = CheckpointCallback(tmp_path, topk=1, monitor=monitor)
    trainer = trainer_with(harness, [saver])
    trainer.run(num_eval_sanity_batch=0)
    assert len(saver.topk_saved) == 1
