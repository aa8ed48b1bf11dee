"""What only the paddle single-process driver has: devices, amp on CPU, forward fallbacks, RNG state."""
from __future__ import annotations

import json
import logging

import numpy as np
import paddle
import pytest
from paddle.io import DataLoader, TensorDataset

from fastcore_train import Accuracy, Evaluator, Trainer, choose_driver
from fastcore_train.backends.paddle import PaddleSingleDriver
from fastcore_train.log import logger

needs_gpu = pytest.mark.skipif(not (paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count()),
                               reason="needs paddlepaddle-gpu and a GPU (none on this machine)")
no_gpu = not (paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count())


class ForwardOnly(paddle.nn.Layer):
    """No train_step: the Trainer must call forward(x, y) and read its 'loss'."""

    def __init__(self):
        super().__init__()
        paddle.seed(0)
        self.linear = paddle.nn.Linear(4, 3)

    def forward(self, x, y):
        return {"loss": paddle.nn.functional.cross_entropy(self.linear(x), y)}


def loader():
    rng = np.random.default_rng(0)
    x = paddle.to_tensor(rng.normal(size=(16, 4)).astype("float32"))
    y = paddle.to_tensor(rng.integers(0, 3, 16).astype("int64"))
    return DataLoader(TensorDataset([x, y]), batch_size=4)


def sgd(model):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())


@pytest.fixture
def warnings_logged():
    """The fastcore_train logger's warnings during the test (the logger does not propagate)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def test_auto_picks_the_paddle_driver_and_forward_is_the_fallback():
    model = ForwardOnly()
    trainer = Trainer(model, loader(), sgd(model), driver="auto", input_mapping={0: "x", 1: "y"}, n_epochs=1,
                      progress_bar=None)
    assert type(trainer.driver) is PaddleSingleDriver
    before = model.linear.weight.numpy().copy()
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4
    assert not np.array_equal(before, model.linear.weight.numpy())


def test_model_wo_auto_param_call_passes_the_batch_whole():
    class WholeBatch(ForwardOnly):
        def forward(self, batch):
            x, y = batch
            return {"loss": paddle.nn.functional.cross_entropy(self.linear(x), y)}

    model = WholeBatch()
    trainer = Trainer(model, loader(), sgd(model), model_wo_auto_param_call=True, n_epochs=1, progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4


def test_fp16_on_cpu_warns_and_trains_in_float32(warnings_logged):
    dtypes = []

    class Spy(ForwardOnly):
        def forward(self, x, y):
            logits = self.linear(x)
            dtypes.append(logits.dtype)
            return {"loss": paddle.nn.functional.cross_entropy(logits, y)}

    model = Spy()
    trainer = Trainer(model, loader(), sgd(model), input_mapping={0: "x", 1: "y"}, fp16=True, n_epochs=1,
                      progress_bar=None)
    messages = [record.getMessage() for record in warnings_logged]
    assert any("fp16=True does nothing on CPU" in message and "float32" in message for message in messages), messages
    trainer.run(num_eval_sanity_batch=0)
    assert dtypes == [paddle.float32] * 4
    assert trainer.driver.precision.scaler is None
    assert np.isfinite(trainer.driver.data.to_numeric(trainer.last_loss))


def test_no_amp_warning_without_fp16(warnings_logged):
    model = ForwardOnly()
    Trainer(model, loader(), sgd(model), input_mapping={0: "x", 1: "y"}, n_epochs=1, progress_bar=None)
    assert not [record for record in warnings_logged if "fp16" in record.getMessage()]


@pytest.mark.parametrize("device", ["cpu", "CPU", None, paddle.CPUPlace(), ["cpu"]])
def test_device_forms(device):
    driver = choose_driver(ForwardOnly(), "paddle", device=device)
    assert type(driver) is PaddleSingleDriver
    assert driver.device == "cpu" and driver.data.device == "cpu"
    assert driver.data.needs_move is False


@pytest.mark.parametrize("device, message", [
    ("gpu" if no_gpu else "gpu:99", "needs a GPU" if no_gpu else "GPU\\(s\\) are visible"),
    ("cuda:0" if no_gpu else "cuda:99", "needs a GPU" if no_gpu else "GPU\\(s\\) are visible"),
    (0 if no_gpu else 99, "needs a GPU" if no_gpu else "GPU\\(s\\) are visible"),
    ("tpu:0", "is not a paddle device"),
    ("gpu:x", "is not a paddle device"),
    (-1 if no_gpu else -3, "sees none" if no_gpu else "pass -1 for every GPU"),
    (3.5, "device must be a str, int, paddle Place or None"),
    ([], "lists no device"),
])
def test_bad_devices(device, message):
    with pytest.raises(ValueError, match=message):
        choose_driver(ForwardOnly(), "paddle", device=device)


def test_a_device_list_mixing_cpu_and_gpu_is_rejected():
    if no_gpu:
        pytest.skip("needs a GPU to name one")
    with pytest.raises(ValueError, match="mixes CPU and GPU"):
        choose_driver(ForwardOnly(), "paddle", device=["cpu", "gpu:0"])


def test_unknown_paddle_kwargs_are_rejected():
    with pytest.raises(TypeError, match=r"Unknown paddle_kwargs \['set_grads_none'\]"):
        choose_driver(ForwardOnly(), "paddle", paddle_kwargs={"set_grads_none": True})


def test_a_data_parallel_model_without_ranks_is_rejected():
    with pytest.raises(ValueError, match="wrapped in paddle.DataParallel but no parallel environment"):
        choose_driver(paddle.DataParallel(ForwardOnly()), "paddle")


@pytest.mark.parametrize("set_grad_to_zero", [True, False])
def test_set_grad_to_zero(set_grad_to_zero):
    model = ForwardOnly()
    trainer = Trainer(model, loader(), sgd(model), input_mapping={0: "x", 1: "y"}, n_epochs=1, progress_bar=None,
                      paddle_kwargs={"set_grad_to_zero": set_grad_to_zero})
    trainer.run(num_eval_sanity_batch=0)
    grad = model.linear.weight.grad
    if set_grad_to_zero:
        assert grad is not None and not np.any(grad.numpy())
    else:
        assert grad is None


def test_evaluation_runs_without_grad_and_in_eval_mode():
    modes = []

    class Probe(ForwardOnly):
        def evaluate_step(self, x, y):
            modes.append((self.training, paddle.is_grad_enabled()))
            return {"pred": self.linear(x), "target": y}

    Evaluator(Probe(), loader(), {"acc": Accuracy()}, input_mapping={0: "x", 1: "y"}, verbose=0).run()
    assert set(modes) == {(False, False)}


def test_rng_state_is_json_and_replays_dropout():
    driver = choose_driver(ForwardOnly(), "paddle")
    state = json.loads(json.dumps(driver.io.rng_state()))
    first = paddle.nn.functional.dropout(paddle.ones([64]), 0.5).numpy()
    driver.io.load_rng_state(state)
    again = paddle.nn.functional.dropout(paddle.ones([64]), 0.5).numpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, paddle.nn.functional.dropout(paddle.ones([64]), 0.5).numpy())


def test_tensor_to_numeric_handles_nested_values():
    driver = choose_driver(ForwardOnly(), "paddle")
    value = {"a": paddle.to_tensor(2.5), "b": [paddle.to_tensor([1, 2])], "c": "text"}
    assert driver.data.to_numeric(value) == {"a": 2.5, "b": [[1, 2]], "c": "text"}


@needs_gpu
def test_fp16_on_gpu_uses_a_grad_scaler():
    model = ForwardOnly()
    trainer = Trainer(model, loader(), sgd(model), device="gpu:0", input_mapping={0: "x", 1: "y"}, fp16=True,
                      n_epochs=1, progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.driver.precision.scaler is not None and model.linear.weight.place.is_gpu_place()
