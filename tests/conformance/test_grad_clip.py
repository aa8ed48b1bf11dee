"""Driver conformance: gradient clipping through the driver equals the framework's own clipping.

The values clip hard (the gradients' 2-norm is about 1, their largest element about 0.3), so an
implementation that does not clip, clips the wrong gradients or clips at the wrong time fails.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from fastcore_train import GradClipCallback
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_close, batches_of, make_trainer

CLIPS = [("norm", 0.05), ("value", 0.01)]


def _norm(grads: dict[str, np.ndarray]) -> float:
    return float(np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values())))


def _driver_clipped_grads(harness, clip_type: str, value: float) -> tuple[dict[str, np.ndarray], object]:
    """Forward and backward through the Trainer's primitives, then the driver's clipping."""
    x, y = make_data(8)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, batch_size=8)
    batch = next(iter(harness.make_dataloader(x, y, 8)))
    trainer.backward(trainer.train_step(batch))
    driver = trainer.driver
    if clip_type == "norm":
        returned = float(driver.data.to_numeric(driver.clip_grad_norm(value)))
    else:
        returned = driver.clip_grad_value(value)
    return harness.grads_of(model, driver.optimizers[0]), returned


def _hand_grads(harness, clip_type, value) -> dict[str, np.ndarray]:
    x, y = make_data(8)
    model = harness.make_model(initial_weights())
    return harness.hand_clipped_grads(model, harness.make_sgd(model, 0.1), x, y, clip_type, value)


@pytest.mark.parametrize("clip_type, value", CLIPS)
def test_driver_clips_like_the_frameworks_own_utility(harness, clip_type, value):
    clipped, returned = _driver_clipped_grads(harness, clip_type, value)
    expected = _hand_grads(harness, clip_type, value)
    unclipped = _hand_grads(harness, None, value)
    for name in expected:
        np.testing.assert_allclose(clipped[name], expected[name], rtol=1e-6, atol=1e-8, err_msg=name)
    assert not all(np.allclose(clipped[name], unclipped[name]) for name in unclipped), "clipping changed nothing"
    if clip_type == "norm":
        assert isinstance(returned, float)
        assert returned == pytest.approx(_norm(unclipped), rel=1e-5)  # the norm before clipping
        assert returned > value
        assert _norm(clipped) == pytest.approx(value, rel=1e-4)
    else:
        assert returned is None
        assert max(float(np.abs(g).max()) for g in clipped.values()) <= value * (1 + 1e-6)
        assert max(float(np.abs(g).max()) for g in unclipped.values()) > value


@pytest.mark.parametrize("accumulation_steps", [1, 2])
@pytest.mark.parametrize("clip_type, value", CLIPS)
def test_trainer_with_grad_clip_callback_equals_the_hand_loop(harness, clip_type, value, accumulation_steps):
    x, y = make_data(32)
    model = harness.make_model(initial_weights())
    callback = GradClipCallback(clip_value=value, clip_type=clip_type)
    make_trainer(harness, model, x, y, batch_size=8, accumulation_steps=accumulation_steps,
                 callbacks=[callback]).run(num_eval_sanity_batch=0)

    batches = batches_of(x, y, 8)
    clipped = harness.make_model(initial_weights())
    harness.hand_train(clipped, harness.make_sgd(clipped, 0.1), batches, loss_scale=1 / accumulation_steps,
                       step_every=accumulation_steps, clip=(clip_type, value))
    assert_weights_close(harness.get_weights(model), harness.get_weights(clipped))

    unclipped = harness.make_model(initial_weights())
    harness.hand_train(unclipped, harness.make_sgd(unclipped, 0.1), batches, loss_scale=1 / accumulation_steps,
                       step_every=accumulation_steps)
    assert not np.allclose(harness.get_weights(model)["w1"], harness.get_weights(unclipped)["w1"]), \
        "clipping made no difference to training"
    if clip_type == "norm":
        assert isinstance(callback.last_total_norm, float) and callback.last_total_norm > value
    else:
        assert callback.last_total_norm is None


def test_a_norm_clip_and_a_value_clip_combine(harness):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    norm, value = GradClipCallback(0.05), GradClipCallback(0.01, clip_type="value")
    make_trainer(harness, model, x, y, callbacks=[norm, value]).run(num_eval_sanity_batch=0)
    assert norm.last_total_norm > 0.05


@pytest.mark.parametrize("kwargs, message", [
    ({"clip_type": "l2"}, r"clip_type must be one of \('norm', 'value'\), got 'l2'"),
    ({"clip_value": 0}, r"clip_value must be a positive number, got 0"),
    ({"clip_value": -1.0}, r"clip_value must be a positive number, got -1.0"),
    ({"clip_value": math.nan}, r"clip_value must be a positive number, got nan"),
    ({"clip_value": "1"}, r"clip_value must be a positive number, got '1'"),
    ({"clip_value": True}, r"clip_value must be a positive number, got True"),
    ({"norm_type": 0}, r"norm_type must be a positive number, got 0"),
])
def test_bad_arguments_raise_a_clear_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GradClipCallback(**kwargs)
