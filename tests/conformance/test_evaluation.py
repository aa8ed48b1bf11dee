"""Driver conformance: evaluation results equal a hand computation."""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train import Accuracy, ClassifyFPreRecMetric, Evaluator
from tests.conformance.harnesses.base import initial_weights, make_data, numpy_logits
from tests.conformance.helpers import make_trainer


def hand_accuracy(x: np.ndarray, y: np.ndarray) -> float:
    return round(float((numpy_logits(initial_weights(), x).argmax(-1) == y).mean()), 6)


def test_standalone_evaluator_accuracy_equals_numpy(harness):
    x, y = make_data(37)  # 37 does not divide by the batch size: the last batch is short
    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, harness.make_dataloader(x, y, 8), metrics={"acc": Accuracy()},
                          driver=harness.driver_name, device="cpu", input_mapping={"y": "target"}, verbose=0)
    results = evaluator.run()
    assert results == {"acc#acc": pytest.approx(hand_accuracy(x, y), abs=1e-6)}
    assert 0 < results["acc#acc"] < 1


def test_several_dataloaders_and_metrics_are_keyed_by_name(harness):
    x, y = make_data(40)
    model = harness.make_model(initial_weights())
    loaders = {"dev": harness.make_dataloader(x[:24], y[:24], 8), "test": harness.make_dataloader(x[24:], y[24:], 5)}
    evaluator = Evaluator(model, loaders, metrics={"acc": Accuracy(), "f1": ClassifyFPreRecMetric(f_type="macro")},
                          driver="auto", input_mapping={"y": "target"}, verbose=0)
    results = evaluator.run()
    assert set(results) == {"acc#acc#dev", "acc#acc#test", "f#f1#dev", "pre#f1#dev", "rec#f1#dev",
                            "f#f1#test", "pre#f1#test", "rec#f1#test"}
    assert results["acc#acc#dev"] == pytest.approx(hand_accuracy(x[:24], y[:24]), abs=1e-6)
    assert results["acc#acc#test"] == pytest.approx(hand_accuracy(x[24:], y[24:]), abs=1e-6)

    pred = numpy_logits(initial_weights(), x[24:]).argmax(-1)
    truth = y[24:]
    f_scores = []
    for label in sorted(set(pred) | set(truth)):
        tp = np.sum((pred == label) & (truth == label))
        fp = np.sum((pred == label) & (truth != label))
        fn = np.sum((pred != label) & (truth == label))
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f_scores.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    assert results["f#f1#test"] == pytest.approx(np.mean(f_scores), abs=1e-5)


def test_num_eval_batch_per_dl_limits_evaluation(harness):
    x, y = make_data(40)
    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, harness.make_dataloader(x, y, 8), metrics={"acc": Accuracy()},
                          input_mapping={"y": "target"}, verbose=0)
    assert evaluator.run(num_eval_batch_per_dl=2)["acc#acc"] == pytest.approx(hand_accuracy(x[:16], y[:16]), abs=1e-6)


def test_trainer_evaluates_every_epoch_and_every_n_batches(harness):
    x, y = make_data(32)
    results = []
    from fastcore_train import Event
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, n_epochs=2, evaluate_dataloaders=harness.make_dataloader(x, y, 16),
                           metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"}, evaluate_every=3)
    trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, r: results.append((t.global_forward_batches, r)))
    trainer.run(num_eval_sanity_batch=0)
    assert [batches for batches, _ in results] == [3, 6]
    assert trainer.evaluate_results == results[-1][1]

    model = harness.make_model(initial_weights())
    epochs = []
    trainer = make_trainer(harness, model, x, y, n_epochs=4, evaluate_dataloaders=harness.make_dataloader(x, y, 16),
                           metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"}, evaluate_every=-2)
    trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, r: epochs.append(t.cur_epoch_idx))
    trainer.run(num_eval_sanity_batch=0)
    assert epochs == [2, 4]

    model = harness.make_model(initial_weights())
    seen = []
    trainer = make_trainer(harness, model, x, y, n_epochs=1, evaluate_dataloaders=harness.make_dataloader(x, y, 16),
                           metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"},
                           evaluate_every=lambda t: t.global_forward_batches == 2)
    trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, r: seen.append(t.global_forward_batches))
    trainer.run(num_eval_sanity_batch=0)
    assert seen == [2]


def test_overfit_batches_trains_and_evaluates_on_the_first_batches(harness):
    x, y = make_data(40)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, n_epochs=3, overfit_batches=2, metrics={"acc": Accuracy()},
                           input_mapping=None, evaluate_input_mapping={"y": "target"})
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 6
    assert trainer.evaluate_results and list(trainer.evaluate_results) == ["acc#acc"]
