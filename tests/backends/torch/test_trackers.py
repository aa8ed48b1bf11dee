"""Experiment trackers hold exactly what a listener saw, across a stop-and-resume, read back with
each tracker's own reader (the torch env installs the ``trackers`` extra; the trackers are
framework-neutral, so one backend's env tests them)."""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train import Event, seed_everything
from fastcore_train.callbacks.trackers.mlflow_tracker import MLflowCallback
from tests.conformance.helpers import SaveAndStop, StopRun
from tests.conformance.test_metric_logs import build


def straight_run(harness):
    """An uninterrupted run; the losses and evaluation results a listener recorded, by step."""
    losses: dict[int, float] = {}
    evaluations: dict[int, dict] = {}
    seed_everything(11)
    trainer = build(harness, [])
    trainer.add_callback_fn(Event.on_train_batch_end(), lambda t: losses.__setitem__(
        t.global_forward_batches, float(t.driver.data.to_numeric(t.last_loss))))
    trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, results: evaluations.__setitem__(
        t.global_forward_batches, dict(results)))
    trainer.run(num_eval_sanity_batch=0)
    return losses, evaluations


def stopped_and_resumed(harness, make_tracker, tmp_path):
    """Stop at batch 10 (after a checkpoint), then resume to the end, with a fresh tracker object."""
    seed_everything(11)
    first = make_tracker()
    with pytest.raises(StopRun):
        build(harness, [first, SaveAndStop(10, tmp_path / "ckpt")]).run(num_eval_sanity_batch=0)
    second = make_tracker()
    build(harness, [second]).run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    return first, second


def test_mlflow_holds_the_listener_values_across_stop_and_resume(harness, tmp_path):
    from mlflow.tracking import MlflowClient
    losses, evaluations = straight_run(harness)
    first, second = stopped_and_resumed(
        harness, lambda: MLflowCallback(tmp_path / "logs", log_every_n_batches=1, run_name="digits"), tmp_path)
    assert first.run_id == second.run_id  # the resumed training continued the same run

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'logs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("fastcore_train")
    runs = client.search_runs([experiment.experiment_id])
    assert [run.info.run_id for run in runs] == [first.run_id]
    assert runs[0].info.status == "FINISHED" and runs[0].info.run_name == "digits"
    history = sorted((m.step, m.value) for m in client.get_metric_history(first.run_id, "train/loss"))
    assert history == sorted(losses.items())
    results = sorted((m.step, m.value) for m in client.get_metric_history(first.run_id, "evaluate/acc_acc"))
    assert results == [(step, evaluations[step]["acc#acc"]) for step in sorted(evaluations)]
    np.testing.assert_array_equal([m.step for m in client.get_metric_history(first.run_id, "epoch")],
                                  sorted([*losses, *evaluations]))


def test_report_to_builds_the_named_trackers(tmp_path):
    from fastcore_train.callbacks.report_to import report_callbacks
    built = report_callbacks(["csv", "mlflow"], tmp_path, every_n_batches=5, run_name="x")
    assert [type(callback).__name__ for callback in built] == ["CSVLoggerCallback", "MLflowCallback"]
    assert built[1].log_every_n_batches == 5 and built[1].run_name == "x"
    with pytest.raises(ValueError, match="unknown reporter"):
        report_callbacks(["comet"], tmp_path)
