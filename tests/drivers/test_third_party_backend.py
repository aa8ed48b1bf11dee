"""A backend registered from outside the package trains end to end and owns its keyword arguments."""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train import Accuracy, Trainer
from fastcore_train.drivers.registry import (BackendEntry, all_driver_kwargs, backend_for_driver_name,
                                             register_backend, unregister_backend)
from tests.drivers import numpy_backend
from tests.drivers.numpy_backend import SGD, SoftmaxRegression

MINE = BackendEntry(name="mine", framework_module="tests_numpy_framework", module="tests.drivers.numpy_backend",
                    driver_names=("mine",), install_hint="nothing to install", owned_kwargs=("mine_kwargs",))


@pytest.fixture
def mine():
    register_backend(MINE)
    numpy_backend.RECEIVED_KWARGS.clear()
    yield
    unregister_backend("mine")


def blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.normal(0, 0.5, (n, 2)) + np.array([[0, 3], [3, 0], [-3, -3]])[y]
    return x, y


def batches(x, y, size=10):
    return [{"x": x[i:i + size], "y": y[i:i + size]} for i in range(0, len(x), size)]


def hand_trained(x, y, n_epochs, lr, grad_scale):
    model = SoftmaxRegression(2, 3)
    for _ in range(n_epochs):
        for batch in batches(x, y):
            loss = model.train_step(batch["x"], batch["y"])["loss"]
            for name, grad in loss.grads.items():
                model.params[name] -= lr * grad_scale * grad
    return model.params


def test_trains_end_to_end_with_its_own_keyword_arguments(mine, tmp_path):
    x, y = blobs(60, seed=0)
    dev_x, dev_y = blobs(30, seed=1)
    model = SoftmaxRegression(2, 3)
    trainer = Trainer(model, batches(x, y), SGD(model, lr=0.5), driver="mine", n_epochs=4, progress_bar=None,
                      mine_kwargs={"grad_scale": 0.5}, evaluate_dataloaders={"dev": batches(dev_x, dev_y)},
                      metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"})
    trainer.run(num_eval_sanity_batch=0)
    assert type(trainer.driver).__name__ == "NumpyDriver" and trainer.driver.grad_scale == 0.5
    expected = hand_trained(x, y, 4, lr=0.5, grad_scale=0.5)
    for name in expected:
        np.testing.assert_allclose(model.params[name], expected[name], rtol=1e-12)
    assert trainer.evaluator.run()["acc#acc#dev"] > 0.9

    trainer.save_checkpoint(tmp_path / "ckpt")
    other = SoftmaxRegression(2, 3, seed=5)
    resumed = Trainer(other, batches(x, y), SGD(other, lr=0.5), driver="mine", n_epochs=4, progress_bar=None)
    resumed.load_checkpoint(tmp_path / "ckpt")
    np.testing.assert_array_equal(other.params["w"], model.params["w"])


def test_it_gets_only_its_own_and_the_common_keyword_arguments(mine):
    model = SoftmaxRegression(2, 3)
    Trainer(model, batches(*blobs(20, 0)), SGD(model, 0.1), driver="mine", progress_bar=None,
            mine_kwargs={}, torch_kwargs={"set_grad_to_none": True}, data_device="cpu")
    assert numpy_backend.RECEIVED_KWARGS == [{"mine_kwargs": {}, "data_device": "cpu"}]


def test_its_keyword_is_known_only_while_it_is_registered(mine):
    assert "mine_kwargs" in all_driver_kwargs()
    unregister_backend("mine")
    assert "mine_kwargs" not in all_driver_kwargs()
    model = SoftmaxRegression(2, 3)
    with pytest.raises(TypeError, match="Unexpected keyword argument 'mine_kwargs'"):
        Trainer(model, batches(*blobs(20, 0)), SGD(model, 0.1), driver="torch", mine_kwargs={})


@pytest.mark.parametrize("entry, message", [
    (BackendEntry("a", "fw", "m", ("torch",), "x"), "Driver name 'torch' already belongs to backend 'torch'"),
    (BackendEntry("a", "fw", "m", ("a",), "x", owned_kwargs=("torch_kwargs",)),
     "'torch_kwargs' already belongs to backend 'torch'"),
    (BackendEntry("a", "fw", "m", (), "x"), "driver_names must list at least one name"),
    (BackendEntry("a", "", "m", ("a",), "x"), "framework_module must be a non-empty string"),
    (BackendEntry("a", "fw", "m", ("a",), "x", owned_kwargs=("data_device",)), "cannot be a keyword argument it owns"),
])
def test_a_malformed_or_clashing_backend_is_refused(entry, message):
    with pytest.raises(ValueError, match=message):
        register_backend(entry)
    assert backend_for_driver_name("a", strict=False) is None


def test_a_backend_module_missing_part_of_the_contract_is_a_clear_error():
    register_backend(BackendEntry("half", "fw", "tests.drivers.test_registry", ("half",), "x"))
    try:
        with pytest.raises(TypeError, match="lacks create_driver, is_model, seed_framework, build_demo"):
            Trainer(object(), [], None, driver="half")
    finally:
        unregister_backend("half")
