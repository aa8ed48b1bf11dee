"""Driver conformance: what a transformers Trainer user relies on, on every backend.

``compute_metrics(eval_pred)`` with an :class:`EvalPrediction`, the evaluation loss as its own
result (transformers' ``eval_loss``) that a monitor can watch, and ``run()`` returning a
:class:`TrainOutput` (``global_step``, ``training_loss``, ``metrics``).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from fastcore_train import EarlyStopCallback, EvalPrediction, Evaluator, Event, TrainOutput
from tests.conformance.harnesses.base import initial_weights, make_data, numpy_logits
from tests.conformance.helpers import make_trainer

SAMPLES = 37  # does not divide by the batch size: the last batch is short


def cross_entropy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample cross entropy of the initial model, by hand."""
    logits = numpy_logits(initial_weights(), x).astype(np.float64)
    logits -= logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -log_probs[np.arange(len(y)), y]


class BatchesSeen:
    """A plain metric object reading the evaluation loss (so an evaluation of ``train_step`` has a metric)."""

    def __init__(self) -> None:
        self.batches = 0

    def update(self, loss):
        self.batches += 1

    def reset(self):
        self.batches = 0

    def get_metric(self):
        return {"batches": self.batches}


def test_compute_metrics_with_one_parameter_gets_an_eval_prediction(harness):
    x, y = make_data(SAMPLES)
    model = harness.make_model(initial_weights())
    seen = {}

    def compute_metrics(eval_pred):  # transformers' form, unchanged
        predictions, labels = eval_pred
        seen.update(kind=type(eval_pred), inputs=eval_pred.inputs, same=(predictions is eval_pred.predictions
                                                                           and labels is eval_pred.label_ids))
        return {"acc": float((predictions.argmax(-1) == labels).mean()), "n": len(eval_pred.label_ids)}

    def with_option(eval_pred, digits=3):  # one required positional parameter: still the one-argument form
        return {"acc": round(float((eval_pred.predictions.argmax(-1) == eval_pred.label_ids).mean()), digits)}

    evaluator = Evaluator(model, harness.make_dataloader(x, y, 8),
                          metrics={"hf": compute_metrics, "opt": with_option,
                                   "two": lambda preds, labels: {"acc": float((preds.argmax(-1) == labels).mean())}},
                          driver=harness.driver_name, input_mapping={"y": "target"}, verbose=0)
    results = evaluator.run()
    hand = float((numpy_logits(initial_weights(), x).argmax(-1) == y).mean())
    assert results == {"acc#hf": pytest.approx(hand, abs=1e-9), "n#hf": SAMPLES,
                       "acc#opt": round(results["acc#two"], 3), "acc#two": pytest.approx(hand, abs=1e-9)}
    assert seen == {"kind": EvalPrediction, "inputs": None, "same": True}
    eval_pred = EvalPrediction(np.zeros((3, 4)), np.arange(3))
    assert len(eval_pred) == 2 and eval_pred[1] is eval_pred.label_ids


def test_the_evaluation_reports_the_mean_loss_over_samples(harness):
    x, y = make_data(SAMPLES + 3)
    model = harness.make_model(initial_weights())
    loaders = {"dev": harness.make_dataloader(x[:SAMPLES], y[:SAMPLES], 8), "test": harness.make_dataloader(x, y, 5)}
    evaluator = Evaluator(model, loaders, metrics={"seen": BatchesSeen()}, driver=harness.driver_name,
                          evaluate_fn="train_step", verbose=0)
    results = evaluator.run()
    losses = cross_entropy(x, y)
    assert set(results) == {"loss#dev", "loss#test", "batches#seen#dev", "batches#seen#test"}
    assert results["loss#dev"] == pytest.approx(losses[:SAMPLES].mean(), rel=1e-5)
    assert results["loss#test"] == pytest.approx(losses.mean(), rel=1e-5)
    # weighted by batch size: the plain mean of the batch means (short last batch) is another number
    batch_means = [losses[i:i + 8].mean() for i in range(0, SAMPLES, 8)]
    assert abs(np.mean(batch_means) - losses[:SAMPLES].mean()) > 1e-4

    unnamed = Evaluator(model, harness.make_dataloader(x, y, 8), metrics={"seen": BatchesSeen()},
                        driver=harness.driver_name, evaluate_fn="train_step", verbose=0).run()
    assert unnamed["loss"] == pytest.approx(losses.mean(), rel=1e-5)


def test_the_evaluation_loss_is_a_monitor(harness):
    x, y = make_data(32)
    model = harness.make_model(initial_weights())
    early_stop = EarlyStopCallback(monitor="loss", larger_better=False, patience=5)
    trainer = make_trainer(harness, model, x, y, n_epochs=3, evaluate_dataloaders=harness.make_dataloader(x, y, 8),
                           metrics={"seen": BatchesSeen()}, evaluate_fn="train_step", callbacks=[early_stop])
    losses = []
    trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, results: losses.append(results["loss"]))
    trainer.run(num_eval_sanity_batch=0)
    assert len(losses) == 3 and losses[-1] < losses[0]  # training lowers the evaluation loss
    assert early_stop.tracker.best == pytest.approx(min(losses))


def test_run_returns_a_train_output(harness):
    x, y = make_data(40)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, batch_size=2, n_epochs=2,  # 40 batches: more than one read
                           evaluate_dataloaders=harness.make_dataloader(x, y, 8),
                           metrics={"acc": lambda preds, labels: {"acc": float((preds.argmax(-1) == labels).mean())}},
                           evaluate_input_mapping={"y": "target"})
    losses = []
    trainer.add_callback_fn(Event.on_train_batch_end(), lambda t: losses.append(
        float(t.driver.data.to_numeric(t.last_loss))))
    output = trainer.run(num_eval_sanity_batch=0)
    assert isinstance(output, TrainOutput) and isinstance(output, tuple)
    global_step, training_loss, metrics = output
    assert global_step == 40 == len(losses)
    lazy = trainer.driver.data.reading_changes_results  # jittor: no loss is tracked (it would change the rounding)
    expected = (lambda values: math.nan) if lazy else np.mean
    assert training_loss == pytest.approx(expected(losses), rel=1e-5, nan_ok=True)
    assert (metrics["train_loss"] == training_loss or lazy) and metrics["epoch"] == 2.0
    assert metrics["train_runtime"] > 0 and metrics["train_steps_per_second"] > 0
    assert metrics["acc#acc"] == trainer.evaluate_results["acc#acc"]

    # another run() reports its own batches: one more epoch
    trainer.state.n_epochs = 3
    losses.clear()
    again = trainer.run(num_eval_sanity_batch=0)
    assert again.global_step == 60 and again.training_loss == pytest.approx(expected(losses), rel=1e-5, nan_ok=True)
    assert len(losses) == 20


def test_a_run_that_trains_nothing_has_no_training_loss(harness):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, n_epochs=0, evaluate_dataloaders=harness.make_dataloader(x, y, 8),
                           metrics={"seen": BatchesSeen()}, evaluate_fn="train_step")
    output = trainer.run(num_eval_sanity_batch=-1)
    assert output.global_step == 0 and math.isnan(output.training_loss)
