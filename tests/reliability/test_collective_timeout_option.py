"""``collective_timeout`` is a driver option of every backend: checked before anything starts, and it
reaches ``driver.comm.timeout`` (the distributed tests show it reaching each rank and acting)."""
from __future__ import annotations

import pytest

from fastcore_train import Accuracy, Evaluator, Trainer
from fastcore_train.drivers.collectives import DEFAULT_COLLECTIVE_TIMEOUT
from tests.conformance.harnesses.base import initial_weights, make_data


def build(harness, **kwargs):
    x, y = make_data(8)
    model = harness.make_model(initial_weights())
    return Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1), driver=harness.driver_name,
                   device="cpu", progress_bar=None, **kwargs)


def test_the_default_and_a_given_timeout_reach_the_driver(harness):
    assert build(harness).driver.comm.timeout == DEFAULT_COLLECTIVE_TIMEOUT == 600
    assert build(harness, collective_timeout=90).driver.comm.timeout == 90.0
    x, y = make_data(8)
    evaluator = Evaluator(harness.make_model(initial_weights()), {"dev": harness.make_dataloader(x, y, 4)},
                          metrics={"acc": Accuracy()}, driver=harness.driver_name, collective_timeout=12.5)
    assert evaluator.driver.comm.timeout == 12.5


@pytest.mark.parametrize("bad", [0, -5, "60", True, float("inf"), float("nan")])
def test_a_bad_timeout_is_a_clear_error(harness, bad):
    with pytest.raises(ValueError, match="collective_timeout must be a positive number of seconds"):
        build(harness, collective_timeout=bad)
