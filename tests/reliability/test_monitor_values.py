"""A monitored result that is not one number (a metric function returning a list, a monitor function
returning an array) is a clear ``MonitorValueError`` (a ``TypeError``) at the evaluation that gave it,
naming the result, the metric and what a monitor expects; never a bare ``float()`` error, and no
checkpoint or early-stop decision comes from it. Runs on every backend (``--backend``)."""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train import CheckpointCallback, EarlyStopCallback, Trainer
from fastcore_train.controllers.monitor import MonitorValueError
from tests.conformance.harnesses.base import initial_weights, make_data


def trainer_with(harness, returned, callbacks):
    """Two epochs, evaluated after each; the metric function ``acc`` returns ``returned``."""
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    return Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                   driver=harness.driver_name, n_epochs=2, progress_bar=None,
                   evaluate_dataloaders={"dev": harness.make_dataloader(x, y, 8)},
                   metrics={"acc": lambda preds, labels: dict(returned)}, evaluate_input_mapping={"y": "target"},
                   callbacks=callbacks)


@pytest.mark.parametrize("value", [[0.5, 0.6], np.array([0.5, 0.6])], ids=["list", "array"])
@pytest.mark.parametrize("callback", ["topk", "early_stop"])
def test_a_metric_returning_a_list_used_as_a_monitor_is_a_clear_error(harness, tmp_path, value, callback):
    watcher = (CheckpointCallback(tmp_path, topk=2, monitor="acc") if callback == "topk"
               else EarlyStopCallback(monitor="acc", patience=1))
    trainer = trainer_with(harness, {"per_class": [0.1, 0.2], "acc": value}, [watcher])
    with pytest.raises(MonitorValueError, match=r"The monitored result 'acc#acc#dev' \(key 'acc' of metric 'acc'\), "
                                                r"matched by monitor 'acc', is .*0\.5, 0\.6.*, a (list|ndarray).*, not one "
                                                r"number: a monitor .* compares one number per evaluation"):
        trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4  # stopped at the first evaluation
    assert not list(tmp_path.rglob("epoch_*"))


def test_a_list_that_is_not_monitored_is_fine(harness, tmp_path):
    saver = CheckpointCallback(tmp_path, topk=1, monitor="acc")
    trainer = trainer_with(harness, {"per_class": [0.1, 0.2], "acc": 0.5}, [saver])
    trainer.run(num_eval_sanity_batch=0)
    assert len(saver.topk_saved) == 1


def test_a_monitor_function_returning_an_array_is_named(harness, tmp_path):
    saver = CheckpointCallback(tmp_path, topk=1, monitor=lambda results: np.array([1.0, 2.0]))
    trainer = trainer_with(harness, {"acc": 0.5}, [saver])
    with pytest.raises(MonitorValueError, match=r"monitor function .*<lambda> returned a value that is "
                                                r"array\(\[1\., 2\.\]\), a ndarray of shape \(2,\), not one number"):
        trainer.run(num_eval_sanity_batch=0)
