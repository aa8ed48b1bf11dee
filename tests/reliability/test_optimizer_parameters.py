"""An optimizer holding none of the model's parameters would train nothing: an error when the Trainer
is built. The framework tests (``--backend``) build real optimizers of each framework, which checks
:func:`~fastcore_train.utils.parameters.optimizer_parameters` reads each kind right.
"""
from __future__ import annotations

import copy

import pytest

from fastcore_train import Trainer
from fastcore_train.utils.parameters import optimizer_parameters, optimizers_miss_the_model
from tests.conformance.harnesses.base import initial_weights, make_data


def build(harness, model, optimizers):
    x, y = make_data(16)
    return Trainer(model, harness.make_dataloader(x, y, 8), optimizers, driver=harness.driver_name,
                   n_epochs=1, progress_bar=None)


def test_the_probe_reads_every_parameter_of_a_real_optimizer(harness):
    model = harness.make_model(initial_weights())
    held = optimizer_parameters(harness.make_sgd(model, 0.1))
    assert held is not None and {id(p) for p in held} == {id(p) for p in model.parameters()}
    momentum = optimizer_parameters(harness.make_sgd(model, 0.1, momentum=0.9))
    assert {id(p) for p in momentum} == {id(p) for p in model.parameters()}


def test_an_optimizer_of_another_model_is_refused(harness):
    model, other = harness.make_model(initial_weights()), harness.make_model(initial_weights())
    with pytest.raises(ValueError, match=r"would train nothing: they hold 4 parameter\(s\), none of which is one "
                                         r"of the model's 4.*SGD\(model.parameters\(\)"):
        build(harness, model, harness.make_sgd(other, 0.1))


def test_an_optimizer_made_before_copying_the_model_is_refused(harness):
    original = harness.make_model(initial_weights())
    optimizer = harness.make_sgd(original, 0.1)
    try:
        copied = copy.deepcopy(original)
    except Exception as error:  # some frameworks' modules cannot be deep-copied; nothing to check then
        pytest.skip(f"deepcopy of a model is not supported here: {error}")
    with pytest.raises(ValueError, match="would train nothing"):
        build(harness, copied, optimizer)


def test_one_of_several_optimizers_holding_the_model_is_enough(harness):
    model, other = harness.make_model(initial_weights()), harness.make_model(initial_weights())
    trainer = build(harness, model, [harness.make_sgd(other, 0.1), harness.make_sgd(model, 0.1)])
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 2


class Group:  # oneflow's ParamGroup: not a dict, a ``parameters`` list
    def __init__(self, parameters):
        self.parameters = parameters


class Model:
    def __init__(self, parameters):
        self._parameters = parameters

    def parameters(self):
        return iter(self._parameters)


@pytest.mark.parametrize("optimizer_of", [
    lambda ps: type("TorchLike", (), {"param_groups": [{"params": ps[:1]}, {"params": ps[1:]}]})(),
    lambda ps: type("OneflowLike", (), {"param_groups": [Group(ps)]})(),
    lambda ps: type("PaddleLike", (), {"_parameter_list": list(ps)})(),
    lambda ps: type("PaddleGroups", (), {"_parameter_list": [{"params": list(ps)}]})(),
], ids=["param_groups dicts", "ParamGroup objects", "_parameter_list", "_parameter_list groups"])
def test_the_probe_reads_each_layout(optimizer_of):
    mine, others = [object(), object()], [object()]
    assert optimizer_parameters(optimizer_of(mine)) == mine
    assert optimizers_miss_the_model(Model(mine), [optimizer_of(mine)]) is None
    assert "none of which" in optimizers_miss_the_model(Model(mine), [optimizer_of(others)])
    assert "no parameters at all" in optimizers_miss_the_model(Model(mine), [optimizer_of([])])


def test_unknown_optimizers_or_models_are_not_judged():
    mine = [object()]
    assert optimizer_parameters(object()) is None
    assert optimizers_miss_the_model(Model(mine), [object()]) is None  # e.g. a third-party backend's optimizer
    assert optimizers_miss_the_model(object(), [type("O", (), {"param_groups": []})()]) is None
    assert optimizers_miss_the_model(Model([]), [type("O", (), {"param_groups": []})()]) is None
