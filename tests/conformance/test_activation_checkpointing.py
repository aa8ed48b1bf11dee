"""Activation checkpointing on every backend: the chosen layers really run again in backward,
training gives the same losses and weights as without it, and checkpoints load either way."""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train import Event, seed_everything
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer


def count_forward_calls(layer, calls: list) -> None:
    """Count every run of ``layer``'s own forward (a recompute calls it again, inside backward)."""
    forward = layer.forward

    def counted(*args, **kwargs):
        calls.append(1)
        return forward(*args, **kwargs)
    layer.forward = counted


def train(harness, spec, dropout: float) -> tuple[list[float], dict, int, list[str]]:
    """Per-step losses, final weights, runs of fc1's forward, and the layers wrapped, over 4 steps."""
    x, y = make_data(32)
    seed_everything(0)
    model = harness.make_model(initial_weights(), dropout=dropout)
    calls: list = []
    count_forward_calls(model.fc1, calls)
    trainer = make_trainer(harness, model, x, y, activation_checkpointing=spec)
    losses: list[float] = []
    trainer.add_callback_fn(Event.on_before_backward(),
                            lambda t, outputs: losses.append(float(t.driver.data.to_numeric(outputs["loss"]))))
    trainer.run(num_eval_sanity_batch=0)
    return losses, harness.get_weights(model), len(calls), trainer.activation_checkpointed


def test_activation_checkpointing_recomputes_and_trains_like_the_run_without(harness):
    x, y = make_data(8)
    if harness.recompute == "none":  # the framework has no recompute facility: a clear error
        with pytest.raises(NotImplementedError, match=f"not available for {harness.driver_name}.*Train without"):
            make_trainer(harness, harness.make_model(initial_weights()), x, y, activation_checkpointing=["Linear"])
        return
    # dropout inside a recomputed layer must draw the same mask twice, where the backend can replay it
    exact = harness.recompute == "exact"
    dropout, spec = (0.3, lambda name, module: name in ("fc1", "dropout")) if exact else (0.0, ["Linear"])
    plain_losses, plain_weights, plain_calls, plain_wrapped = train(harness, None, dropout)
    losses, weights, calls, wrapped = train(harness, spec, dropout)
    assert plain_wrapped == [] and wrapped == (["fc1", "dropout"] if exact else ["fc1", "fc2"])
    assert len(losses) == 4 and plain_calls == 4 and calls == 8, "fc1 runs once in forward, once more in backward"
    np.testing.assert_array_equal(losses, plain_losses)
    assert_weights_equal(weights, plain_weights)
    if not exact:
        with pytest.raises(ValueError, match="'dropout'.*draw random numbers"):
            make_trainer(harness, harness.make_model(initial_weights(), dropout=0.3), x, y,
                         activation_checkpointing=lambda name, module: name == "dropout")


def test_checkpoints_load_with_and_without_activation_checkpointing(harness, tmp_path):
    if harness.recompute == "none":
        pytest.skip(f"{harness.driver_name} has no activation checkpointing (its error is tested above)")
    x, y = make_data(16)

    def trainer_for(model, n_epochs, spec):
        return make_trainer(harness, model, x, y, n_epochs=n_epochs, activation_checkpointing=spec,
                            optimizers=harness.make_sgd(model, 0.1, momentum=0.9))

    uninterrupted = harness.make_model(initial_weights())
    trainer_for(uninterrupted, 2, None).run(num_eval_sanity_batch=0)
    for index, (first, then) in enumerate(((["Linear"], None), (None, ["Linear"]))):
        trainer = trainer_for(harness.make_model(initial_weights()), 1, first)
        trainer.run(num_eval_sanity_batch=0)
        trainer.save_checkpoint(tmp_path / f"ckpt{index}")
        resumed = harness.make_model(initial_weights(seed=3))
        trainer_for(resumed, 2, then).run(num_eval_sanity_batch=0, resume_from=tmp_path / f"ckpt{index}")
        assert_weights_equal(harness.get_weights(resumed), harness.get_weights(uninterrupted))
