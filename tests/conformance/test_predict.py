"""Driver conformance: predictions, metric functions and the model summary on every backend."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from fastcore_train import Evaluator, summarize
from fastcore_train.controllers.prediction_shards import PredictionShards
from tests.conformance.harnesses.base import initial_weights, make_data, numpy_logits
from tests.conformance.helpers import make_trainer

SAMPLES = 37  # does not divide by the batch size: the last batch is short


def test_trainer_predict_returns_every_sample_in_dataset_order(harness):
    x, y = make_data(SAMPLES)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y)
    # a shuffling dataloader: predictions still come back in dataset order
    predictions = trainer.predict(harness.make_dataloader(x, y, 8, shuffle=True))
    assert set(predictions) == {"pred"} and predictions["pred"].shape == (SAMPLES, 4)
    np.testing.assert_allclose(predictions["pred"], harness.predict(model, x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(predictions["pred"], numpy_logits(initial_weights(), x), rtol=1e-4, atol=1e-5)


def test_predict_after_training_uses_the_trained_weights_and_keeps_training_possible(harness):
    x, y = make_data(SAMPLES)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y)
    trainer.run(num_eval_sanity_batch=0)
    predictions = trainer.predict(harness.make_dataloader(x, y, 8))
    np.testing.assert_allclose(predictions["pred"], harness.predict(model, x), rtol=1e-6, atol=1e-6)
    assert not np.allclose(predictions["pred"], numpy_logits(initial_weights(), x), atol=1e-3)
    trainer.run(num_eval_sanity_batch=0)  # the model is back in train mode and trains on


def test_evaluator_predict_uses_its_one_dataloader(harness):
    x, y = make_data(SAMPLES)
    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, harness.make_dataloader(x, y, 8), metrics=lambda p, t: {"n": len(t)},
                          driver=harness.driver_name, input_mapping={"y": "target"}, verbose=0)
    np.testing.assert_allclose(evaluator.predict()["pred"], harness.predict(model, x), rtol=1e-6, atol=1e-6)


def test_streamed_shards_equal_the_in_memory_predictions(harness, tmp_path):
    x, y = make_data(SAMPLES)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y)
    in_memory = trainer.predict(harness.make_dataloader(x, y, 8, shuffle=True))
    shards = trainer.predict(harness.make_dataloader(x, y, 8, shuffle=True), output_dir=tmp_path / "pred")
    assert isinstance(shards, PredictionShards) and len(shards) == SAMPLES
    assert len(list((tmp_path / "pred").glob("*.npz"))) == 5  # one shard per batch
    np.testing.assert_array_equal(shards.load()["pred"], in_memory["pred"])
    rows = list(shards)  # streamed in dataset order
    np.testing.assert_array_equal(np.stack([row["pred"] for row in rows]), in_memory["pred"])
    with pytest.raises(FileExistsError, match="already holds predictions"):
        trainer.predict(harness.make_dataloader(x, y, 8), output_dir=tmp_path / "pred")


def test_a_model_method_that_does_not_exist_is_a_clear_error(harness):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y)
    with pytest.raises((AttributeError, ValueError, TypeError), match="no_such_step"):
        trainer.predict(harness.make_dataloader(x, y, 8), predict_fn="no_such_step")


def test_a_metric_function_sees_every_prediction_and_label(harness):
    x, y = make_data(SAMPLES)
    model = harness.make_model(initial_weights())
    seen = {}

    def accuracy(preds, labels):
        seen["shapes"] = preds.shape, labels.shape
        return {"acc": (preds.argmax(-1) == labels).mean(), "n": len(labels)}

    evaluator = Evaluator(model, harness.make_dataloader(x, y, 8), metrics={"fn": accuracy},
                          driver=harness.driver_name, input_mapping={"y": "target"}, verbose=0)
    results = evaluator.run()
    hand = float((numpy_logits(initial_weights(), x).argmax(-1) == y).mean())
    assert results == {"acc#fn": pytest.approx(hand, abs=1e-9), "n#fn": SAMPLES}
    assert isinstance(results["acc#fn"], float) and seen["shapes"] == ((SAMPLES, 4), (SAMPLES,))


def test_a_metric_function_in_the_trainer_feeds_monitors(harness):
    x, y = make_data(SAMPLES)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, evaluate_dataloaders=harness.make_dataloader(x, y, 8),
                           metrics={"fn": lambda p, t: {"acc": float((p.argmax(-1) == t).mean())}},
                           evaluate_input_mapping={"y": "target"}, monitor="acc#fn")
    trainer.run(num_eval_sanity_batch=0)
    assert set(trainer.evaluate_results) == {"acc#fn"}


def test_a_metric_function_returning_no_dict_is_a_clear_error(harness):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, harness.make_dataloader(x, y, 8), metrics={"bad": lambda p, t: 0.5},
                          driver=harness.driver_name, input_mapping={"y": "target"}, verbose=0)
    with pytest.raises(TypeError, match=r"metrics\['bad'\] is a function that returned a float"):
        evaluator.run()


def test_the_summary_counts_what_the_framework_counts(harness, caplog):
    model = harness.make_model(initial_weights(), dropout=0.1)
    summary = summarize(model)
    framework_count = sum(weight.size for weight in harness.get_weights(model).values())
    assert summary.total_params == summary.trainable_params == framework_count == 180
    assert [(row.name, row.params) for row in summary.rows if row.params] == [("fc1", 112), ("fc2", 68)]
    assert summary.size_mb == pytest.approx(180 * 4 / 1e6)
    assert "180 total parameters" in str(summary)
    x, y = make_data(16)
    with caplog.at_level(logging.INFO, logger="fastcore_train"):
        make_trainer(harness, model, x, y).run(num_eval_sanity_batch=0)
        make_trainer(harness, model, x, y, model_summary=False).run(num_eval_sanity_batch=0)
    assert sum("Model summary" in record.getMessage() for record in caplog.records) == 1


def test_predict_under_mixed_precision_returns_float_arrays(harness):
    # On CPU, fp16=True is bfloat16 autocast on torch: numpy has no bfloat16, and paddle would hand
    # its raw uint16 storage back. Predictions come back as float32 values close to the fp32 ones.
    x, y = make_data(SAMPLES)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, fp16=True)
    predictions = trainer.predict(harness.make_dataloader(x, y, 8))
    assert predictions["pred"].dtype.kind == "f" and predictions["pred"].shape == (SAMPLES, 4)
    np.testing.assert_allclose(predictions["pred"], numpy_logits(initial_weights(), x), rtol=5e-2, atol=5e-2)
