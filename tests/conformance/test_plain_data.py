"""Driver conformance: plain data trains and evaluates on every backend.

Batches of numpy arrays reach the model as the framework's tensors on the driver's device, from
three sources: a list of dict batches, a numpy-returning dataset (a plain class) behind the
framework's own dataloader, and a Hugging Face ``datasets.Dataset`` built locally in numpy format
(behind the framework's dataloader, and as the batches of ``Dataset.iter``). Each run must end
with weights bit-identical to the framework's hand-written loop over the same batches, and its
evaluation must equal the reference model's accuracy.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from fastcore_train import Accuracy, Callback, Trainer
from fastcore_train.controllers.loss_check import grad_probe
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, batches_of
from tests.numpy_rows import NumpyRows

REQUIRE_HF = "FASTCORE_TRAIN_REQUIRE_HF"
BATCH = 8


def hf_datasets() -> Any:
    """The ``datasets`` package; a missing one skips the test, except where tox asks for it (hf extra)."""
    if os.environ.get(REQUIRE_HF):
        import datasets  # noqa: F401  (an ImportError here is the failure tox must show)
    return pytest.importorskip("datasets", reason="Hugging Face datasets is not installed (pip install -e '.[hf]')")


class Record(Callback):
    """Whether each training batch's inputs were framework tensors, and each evaluation's results."""

    def __init__(self, is_tensor: Any) -> None:
        self.is_tensor = is_tensor
        self.tensor_inputs: list[bool] = []
        self.results: list[dict] = []

    def on_train_batch_begin(self, trainer, batch, indices):
        self.tensor_inputs.append(all(self.is_tensor(batch[key]) is not None for key in ("x", "y")))

    def on_evaluate_end(self, trainer, results):
        self.results.append(dict(results))


def train_and_evaluate(harness: Any, train: Any, dev: Any, n_epochs: int = 2) -> tuple[Any, Record]:
    model = harness.make_model(initial_weights())
    record = Record(grad_probe(harness.driver_name))
    Trainer(model=model, driver=harness.driver_name, device="cpu", train_dataloader=train,
            optimizers=harness.make_sgd(model, 0.1), n_epochs=n_epochs, evaluate_dataloaders={"dev": dev},
            metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"}, evaluate_every=-1,
            progress_bar=None, callbacks=[record]).run(num_eval_sanity_batch=0)
    return model, record


def assert_like_hand_loop(harness: Any, model: Any, record: Record, x: np.ndarray, y: np.ndarray,
                          dev_x: np.ndarray, dev_y: np.ndarray, n_epochs: int = 2) -> None:
    """Weights bit-identical to the hand loop; every batch arrived as tensors; accuracy as computed by hand."""
    reference = harness.make_model(initial_weights())
    harness.hand_train(reference, harness.make_sgd(reference, 0.1), batches_of(x, y, BATCH) * n_epochs)
    assert not np.array_equal(harness.get_weights(model)["w1"], initial_weights()["w1"]), "training did nothing"
    assert_weights_equal(harness.get_weights(model), harness.get_weights(reference))

    assert len(record.tensor_inputs) == n_epochs * -(-len(x) // BATCH)
    assert all(record.tensor_inputs), f"numpy reached the model instead of {harness.driver_name} tensors"
    expected = float((harness.predict(reference, dev_x).argmax(-1) == dev_y).mean())
    assert len(record.results) == n_epochs
    assert record.results[-1] == {"acc#acc#dev": pytest.approx(expected, abs=1e-6)}
    assert 0 < expected < 1


def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, y = make_data(60)
    return x[:36], y[:36], x[36:], y[36:]  # 36 / 8: the last training batch is short


def test_a_list_of_numpy_batches_trains_and_evaluates(harness):
    x, y, dev_x, dev_y = data()
    as_dicts = lambda a, b: [{"x": bx, "y": by} for bx, by in batches_of(a, b, BATCH)]  # noqa: E731
    model, record = train_and_evaluate(harness, as_dicts(x, y), as_dicts(dev_x, dev_y))
    assert_like_hand_loop(harness, model, record, x, y, dev_x, dev_y)


def test_a_numpy_dataset_with_the_frameworks_dataloader(harness):
    x, y, dev_x, dev_y = data()
    model, record = train_and_evaluate(harness, harness.loader_over(NumpyRows(x, y), BATCH),
                                       harness.loader_over(NumpyRows(dev_x, dev_y), BATCH))
    assert_like_hand_loop(harness, model, record, x, y, dev_x, dev_y)


def test_a_numpy_dataset_equals_the_same_run_on_framework_tensors(harness):
    """The numpy dataset's run and the harness's tensor dataloader's run end bit-identical."""
    x, y, dev_x, dev_y = data()
    from_numpy, _ = train_and_evaluate(harness, harness.loader_over(NumpyRows(x, y), BATCH),
                                       harness.loader_over(NumpyRows(dev_x, dev_y), BATCH))
    from_tensors, _ = train_and_evaluate(harness, harness.make_dataloader(x, y, BATCH),
                                         harness.make_dataloader(dev_x, dev_y, BATCH))
    assert_weights_equal(harness.get_weights(from_numpy), harness.get_weights(from_tensors))


@pytest.mark.parametrize("set_format", [True, False], ids=["set_format", "with_format"])
def test_a_hugging_face_dataset_with_the_frameworks_dataloader(harness, set_format):
    datasets = hf_datasets()
    x, y, dev_x, dev_y = data()

    def numpy_dataset(a: np.ndarray, b: np.ndarray) -> Any:
        dataset = datasets.Dataset.from_dict({"x": a, "y": b, "text": [f"row {i}" for i in range(len(a))]})
        if set_format:
            dataset.set_format("numpy", columns=["x", "y"])
            return dataset
        return dataset.select_columns(["x", "y"]).with_format("numpy")

    train = numpy_dataset(x, y)
    assert train[0]["x"].dtype == np.float32 and isinstance(train[0]["x"], np.ndarray)
    model, record = train_and_evaluate(harness, harness.loader_over(train, BATCH),
                                       harness.loader_over(numpy_dataset(dev_x, dev_y), BATCH))
    assert_like_hand_loop(harness, model, record, x, y, dev_x, dev_y)


def test_a_hugging_face_datasets_numpy_batches_as_a_list(harness):
    """``Dataset.iter(batch_size)`` in numpy format gives dicts of arrays; a string column stays numpy."""
    datasets = hf_datasets()
    x, y, dev_x, dev_y = data()

    def batches(a: np.ndarray, b: np.ndarray) -> list[dict[str, np.ndarray]]:
        dataset = datasets.Dataset.from_dict({"x": a, "y": b, "text": [f"row {i}" for i in range(len(a))]})
        return list(dataset.with_format("numpy").iter(batch_size=BATCH))

    train = batches(x, y)
    assert train[0]["text"].dtype.kind in "OU"  # not numeric: passed through, not made a tensor
    model, record = train_and_evaluate(harness, train, batches(dev_x, dev_y))
    assert_like_hand_loop(harness, model, record, x, y, dev_x, dev_y)
