"""Jittor-specific behaviour of the single-process driver: picking it, the forward, jittor's
optimizer semantics, mixed precision, random state and devices."""
from __future__ import annotations

import json

import jittor as jt
import numpy as np
import pytest

from fastcore_train import Event, Trainer, seed_everything
from fastcore_train.backends.jittor import JittorMPIDriver, JittorSingleDriver, create_driver
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.harnesses.jittor import Harness, MLP
from tests.conformance.helpers import assert_weights_equal

HARNESS = Harness()


class LossInExecute(jt.Module):
    """A model with only ``execute``, which returns the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = MLP(initial_weights(), 0.0)

    def execute(self, x, y):
        return {"loss": jt.nn.cross_entropy_loss(self.inner(x), y)}


def trainer_for(model, x, y, **kwargs):
    return Trainer(model, HARNESS.make_dataloader(x, y, 8), HARNESS.make_sgd(model, 0.1), progress_bar=None,
                   **{"driver": "auto", "n_epochs": 1, **kwargs})


def test_auto_picks_the_jittor_driver():
    x, y = make_data(16)
    trainer = trainer_for(HARNESS.make_model(initial_weights()), x, y)
    assert type(trainer.driver) is JittorSingleDriver and trainer.driver.device == "cpu"


def test_execute_is_the_forward_when_there_is_no_train_step():
    x, y = make_data(16)
    model = LossInExecute()
    trainer_for(model, x, y).run(num_eval_sanity_batch=0)
    reference = HARNESS.make_model(initial_weights())
    HARNESS.hand_train(reference, HARNESS.make_sgd(reference, 0.1), [(x[:8], y[:8]), (x[8:], y[8:])])
    assert_weights_equal(HARNESS.get_weights(model.inner), HARNESS.get_weights(reference))


def test_a_device_list_of_one_and_bad_devices():
    model = HARNESS.make_model(initial_weights())
    x, y = make_data(8)
    assert type(trainer_for(model, x, y, device=["cpu"]).driver) is JittorSingleDriver
    with pytest.raises(ValueError, match="not a jittor device"):
        trainer_for(model, x, y, device="tpu")
    with pytest.raises(ValueError, match="mixes CPU and GPU"):
        trainer_for(model, x, y, device=["cpu", "cuda"])
    with pytest.raises(TypeError, match="Unknown jittor_kwargs"):
        trainer_for(model, x, y, jittor_kwargs={"nope": 1})


def test_data_device_other_than_the_models_is_refused_not_ignored():
    model = HARNESS.make_model(initial_weights())
    x, y = make_data(8)
    assert trainer_for(model, x, y, data_device="cpu").driver.data.device == "cpu"
    with pytest.raises(ValueError, match="data_device='cuda' differs from the model's device 'cpu'"):
        trainer_for(model, x, y, data_device="cuda")


def test_fp16_sets_jittors_mixed_precision_flag_during_the_forward_only():
    x, y = make_data(16)
    seen = []

    class Recording(MLP):
        def train_step(self, x, y):
            seen.append(jt.flags.auto_mixed_precision_level)
            return super().train_step(x, y)

    model = Recording(initial_weights(), 0.0)
    trainer_for(model, x, y, fp16=True, jittor_kwargs={"amp_level": 4}).run(num_eval_sanity_batch=0)
    assert seen == [4, 4] and jt.flags.auto_mixed_precision_level == 0


def test_dropout_runs_are_reproducible_and_rng_state_round_trips():
    x, y = make_data(32)

    def run(steps_losses):
        model = HARNESS.make_model(initial_weights(), dropout=0.5)
        trainer = trainer_for(model, x, y, n_epochs=2)
        trainer.add_callback_fn(Event.on_after_backward(),
                                lambda t: steps_losses.append(t.driver.data.to_numeric(t.last_loss)))
        trainer.run(num_eval_sanity_batch=0)
        return trainer

    seed_everything(5)
    first: list = []
    trainer = run(first)
    seed_everything(5)
    second: list = []
    run(second)
    assert first == second and len(set(first)) == len(first)

    state = trainer.driver.io.rng_state()
    assert state == json.loads(json.dumps(state)), "JSON-able"
    draws = []
    for _ in range(2):
        trainer.driver.io.load_rng_state(state)
        trainer.driver.seeder.before_step()
        draws.append(jt.random((5,)).numpy())
    np.testing.assert_array_equal(draws[0], draws[1])


def test_backward_accumulates_until_step_and_step_clears():
    x, y = make_data(16)
    model = HARNESS.make_model(initial_weights())
    optimizer = HARNESS.make_sgd(model, 0.1)
    driver = JittorSingleDriver(model)
    driver.set_optimizers(optimizer)
    driver.ensure_setup()
    for _ in range(2):
        driver.backward(jt.nn.cross_entropy_loss(model(jt.array(x)), jt.array(y)) / 2)
    driver.step()
    reference = HARNESS.make_model(initial_weights())
    ref_optimizer = HARNESS.make_sgd(reference, 0.1)
    ref_optimizer.step(jt.nn.cross_entropy_loss(reference(jt.array(x)), jt.array(y)))
    np.testing.assert_allclose(HARNESS.get_weights(model)["w1"], HARNESS.get_weights(reference)["w1"], rtol=1e-6)


def test_a_device_list_without_mpi_builds_the_mpi_driver_without_starting_it():
    model = HARNESS.make_model(initial_weights())
    driver = create_driver("jittor", model, device=["cpu", "cpu"])
    assert type(driver) is JittorMPIDriver and driver.comm.world_size == 2 and driver.comm.rank == 0
