"""fastNLP 1.0 metrics run unchanged, on every backend, in one process: custom metrics with
register_element (elements holding the backend's tensors), and the frameworks' library metrics
(torchmetrics, paddle.metric) in the Evaluator, against results computed by hand."""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train import Accuracy, Evaluator, Trainer
from fastcore_train.metrics.element_ops import element_ops
from tests.compat.metric_suite import (FastNLPStyleStats, all_metrics, check_against_hand, input_mapping,
                                       library_metrics, output_mapping)
from tests.conformance.harnesses.base import initial_weights, make_data, numpy_logits

SAMPLES = 37


def evaluate(harness, backend_name, metrics, **kwargs):
    x, y = make_data(SAMPLES, seed=9)
    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, {"dev": harness.make_dataloader(x, y, 5, with_index=True)}, metrics,
                          driver=harness.driver_name, input_mapping=input_mapping, output_mapping=output_mapping,
                          verbose=0, **kwargs)
    return evaluator, evaluator.run(), numpy_logits(initial_weights(), x), y


def test_every_metric_kind_equals_the_hand_computation(harness, backend_name):
    metrics = all_metrics(backend_name)
    _, results, logits, y = evaluate(harness, backend_name, metrics)
    check_against_hand(results, logits, y, backend_name)
    assert results["per_rank#seen#dev"] == [sorted(results["per_rank#seen#dev"][0])]


def test_auto_elements_hold_the_drivers_tensors(harness, backend_name):
    stats = FastNLPStyleStats()
    assert stats.backend == "auto"
    evaluate(harness, backend_name, {"stats": stats})
    assert stats.backend == backend_name
    ops = element_ops(backend_name)
    for element in stats.elements.values():
        assert ops.is_tensor(element.value), type(element.value)
    # after the evaluation the elements are reset, still of the backend
    assert stats.correct.get_scalar() == 0 and ops.is_tensor(stats.correct.value)


def test_trainer_metrics_accept_library_and_custom_metrics(harness, backend_name):
    x, y = make_data(32, seed=4)
    ex, ey = make_data(SAMPLES, seed=9)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 8), harness.make_sgd(model, 0.0),
                      driver=harness.driver_name, n_epochs=1, progress_bar=None,
                      evaluate_dataloaders=harness.make_dataloader(ex, ey, 5, with_index=True),
                      metrics=all_metrics(backend_name), evaluate_input_mapping=input_mapping,
                      evaluate_output_mapping=output_mapping)
    trainer.run(num_eval_sanity_batch=0)
    results = trainer.evaluator.run()
    logits = numpy_logits(harness.get_weights(model), ex)
    check_against_hand({f"{key}#dev": value for key, value in results.items()}, logits, ey, backend_name)


class ElementArithmetic(FastNLPStyleStats):
    """Elements combined with the framework's own tensors, as a fastNLP metric may do."""

    def update(self, pred, target):
        super().update(pred, target)
        self.total = self.total + 0 * pred.sum().item()


def test_elements_behave_like_backend_tensors(backend_name):
    ops = element_ops(backend_name)
    metric = FastNLPStyleStats(backend=backend_name)
    logits = ops.from_numpy(np.array([[0.0, 2.0], [3.0, -1.0], [1.0, 5.0]], dtype=np.float32))
    target = ops.from_numpy(np.array([1, 0, 0]))
    metric.update(logits, target)
    assert metric.get_metric() == {"acc": round(2 / 3, 6), "total": 3, "share_acc": pytest.approx(2 / 3),
                                   "max": 5.0, "min": -1.0}
    correct = metric.correct
    assert ops.is_tensor(correct.value) and correct.item() == 2 and correct.get_scalar() == 2
    tensor_two = ops.from_numpy(np.array(2))
    assert correct + 1 == 3 and 1 + correct == 3 and correct - 1 == 1 and 5 - correct == 3
    assert correct * 2 == 4 and correct / metric.total == pytest.approx(2 / 3) and 2 ** correct == 4
    assert correct == 2 and correct != 3 and correct < 3 and correct >= 2 and not correct > 2
    assert (correct + tensor_two) == 4 and float(correct) == 2.0 and int(correct) == 2 and bool(correct)
    assert correct.numpy().reshape(()) == 2 and np.asarray(correct).reshape(()) == 2
    correct.fill_value(7)
    assert metric.correct == 7 and ops.is_tensor(metric.correct.value)
    metric.correct = 1.5  # an int element filled with a fraction keeps it (no silent truncation)
    assert metric.correct.get_scalar() == 1.5
    metric.to(None)
    metric.reset()
    assert metric.correct == 0 and metric.total == 0 and metric.max_logit == -1e9
    assert metric.all_gather_object({"a": 1}) == [{"a": 1}]


def test_library_metrics_are_recognised_without_being_fastcore_metrics(backend_name):
    for metric in library_metrics(backend_name).values():
        assert not isinstance(metric, Accuracy)
        from fastcore_train.metrics.adapters import adapt_metric
        assert adapt_metric(metric) is not None
