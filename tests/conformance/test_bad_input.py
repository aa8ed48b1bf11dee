"""Driver conformance: bad input gets an error that says what was wrong and what to do."""
from __future__ import annotations

import re

import pytest

from fastcore_train import Accuracy, Evaluator, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data


def build(harness, **overrides):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    arguments = dict(model=model, train_dataloader=harness.make_dataloader(x, y, 8),
                     optimizers=harness.make_sgd(model, 0.1), driver=harness.driver_name, progress_bar=None)
    arguments.update(overrides)
    return Trainer(**arguments)


class NotAModel:
    pass


BAD_TRAINER_ARGUMENTS = [
    ("wrong driver name", {"driver": "tensorflow"}, ValueError, r"Unknown driver 'tensorflow'. Available drivers: .*torch"),
    ("driver of wrong type", {"driver": 3}, ValueError, r"driver must be a name"),
    ("foreign model, named driver", {"model": NotAModel()}, ValueError,
     r"trains \w+ models, but got an object of type NotAModel.*Available drivers"),
    ("foreign model, auto", {"model": NotAModel(), "driver": "auto"}, ValueError,
     r"driver='auto' cannot tell which framework.*NotAModel"),
    ("metrics without evaluate_dataloaders", {"metrics": {"acc": Accuracy()}}, ValueError,
     r"metrics were given but no evaluate_dataloaders"),
    ("evaluate_dataloaders without metrics", {"evaluate_dataloaders": [1]}, ValueError,
     r"evaluate_dataloaders were given without metrics"),
    ("evaluate_every zero", {"evaluate_every": 0}, ValueError, r"evaluate_every must be a non-zero int"),
    ("evaluate_every string", {"evaluate_every": "epoch"}, ValueError, r"evaluate_every must be a non-zero int"),
    ("accumulation_steps zero", {"accumulation_steps": 0}, ValueError, r"accumulation_steps must be a positive int"),
    ("accumulation_steps float", {"accumulation_steps": 2.0}, ValueError, r"accumulation_steps must be a positive int"),
    ("n_epochs negative", {"n_epochs": -1}, ValueError, r"n_epochs must be a positive int"),
    ("n_batches zero", {"n_batches": 0}, ValueError, r"n_batches must be a positive int \(or -1\)"),
    ("overfit_batches", {"overfit_batches": -3}, ValueError, r"overfit_batches must be 0"),
    ("no optimizers", {"optimizers": None}, ValueError, r"optimizers is required"),
    ("optimizer of another kind", {"optimizers": [object()]}, TypeError, r"needs .*[Oo]ptimizer"),
    ("no train_dataloader", {"train_dataloader": None}, ValueError, r"train_dataloader is required"),
    ("batch_step_fn not callable", {"batch_step_fn": 5}, ValueError, r"batch_step_fn must be callable"),
    ("unknown keyword", {"evalute_every": 3}, TypeError, r"Unexpected keyword argument 'evalute_every'"),
    ("bad progress bar", {"progress_bar": "fancy"}, ValueError, r"progress_bar must be one of"),
    ("monitor of wrong type", {"monitor": 3}, ValueError, r"monitor must be a result name"),
    ("missing train_fn", {"train_fn": "no_such_method"}, ValueError, r"has no method 'no_such_method'"),
]


@pytest.mark.parametrize("overrides, error, message",
                         [case[1:] for case in BAD_TRAINER_ARGUMENTS], ids=[case[0] for case in BAD_TRAINER_ARGUMENTS])
def test_bad_trainer_arguments(harness, overrides, error, message):
    with pytest.raises(error, match=message):
        build(harness, **overrides)


def test_batch_without_loss_says_how_to_fix_it(harness):
    trainer = build(harness, output_mapping=lambda outputs: {"objective": outputs["loss"]})
    with pytest.raises(KeyError, match=re.escape("output_mapping={'your_key': 'loss'}")):
        trainer.run(num_eval_sanity_batch=0)


def test_output_that_is_not_a_dict_says_how_to_fix_it(harness):
    trainer = build(harness, output_mapping=lambda outputs: [outputs["loss"]])
    with pytest.raises(TypeError, match=r"returned a list, which has no 'loss'.*output_mapping"):
        trainer.run(num_eval_sanity_batch=0)


def test_missing_batch_key_names_it_and_the_available_keys(harness):
    trainer = build(harness, input_mapping=lambda batch: {"x": batch["x"]})
    with pytest.raises(ValueError, match=r"needs the parameter\(s\) \['y'\] but the batch only has keys \['x'\]"):
        trainer.run(num_eval_sanity_batch=0)


def test_ambiguous_metric_input_is_rejected(harness):
    x, y = make_data(8)
    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, harness.make_dataloader(x, y, 8), metrics={"acc": Accuracy()},
                          driver=harness.driver_name, verbose=0,
                          output_mapping=lambda outputs: {"pred": outputs["pred"], "target": outputs["pred"]},
                          input_mapping={"y": "target"})
    with pytest.raises(ValueError, match=r"Ambiguous input.*'target'.*output_mapping or input_mapping"):
        evaluator.run()


def test_colliding_input_mapping_is_rejected(harness):
    trainer = build(harness, input_mapping={"x": "y"})
    with pytest.raises(ValueError, match=r"collide on \['y'\]"):
        trainer.run(num_eval_sanity_batch=0)


def test_missing_checkpoint_folder(harness, tmp_path):
    trainer = build(harness)
    with pytest.raises(FileNotFoundError, match="No checkpoint folder"):
        trainer.run(resume_from=tmp_path / "nope")


def test_bad_run_arguments(harness):
    trainer = build(harness)
    with pytest.raises(ValueError, match="num_train_batch_per_epoch must be a positive int"):
        trainer.run(num_train_batch_per_epoch=0)
    with pytest.raises(ValueError, match="num_eval_sanity_batch must be an int >= 0 \\(or -1"):
        trainer.run(num_eval_sanity_batch=-2)
