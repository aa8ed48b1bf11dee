"""Values that used to fail obscurely or do nothing: n_epochs=0 with nothing to evaluate, report_to
that is no name, a metric function returning text, prediction names the shards cannot hold, a requeue signal that
cannot work. Runs on
every backend (``--backend``)."""
from __future__ import annotations

import re
import signal

import pytest

from fastcore_train import Accuracy, CheckpointCallback, Evaluator, Event, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.reliability.conftest import messages


def build(harness, **kwargs):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    kwargs.setdefault("progress_bar", None)
    return Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                   driver=harness.driver_name, **kwargs)


def dev(harness):
    x, y = make_data(8)
    return harness.make_dataloader(x, y, 4)


def test_n_epochs_0_without_evaluation_is_refused_when_the_trainer_is_built(harness):
    with pytest.raises(ValueError, match=r"n_epochs=0 trains no batch, and with no evaluate_dataloaders .* would do "
                                         r"nothing"):
        build(harness, n_epochs=0)


def test_n_epochs_0_with_evaluation_evaluates_and_says_how_much(harness, log_records):
    trainer = build(harness, n_epochs=0, evaluate_dataloaders=dev(harness), metrics={"acc": Accuracy()},
                    evaluate_input_mapping={"y": "target"})
    seen = []
    trainer.add_callback_fn(Event.on_sanity_check_end(),
                            lambda trainer, results: seen.append(results))
    trainer.run(num_eval_sanity_batch=-1)
    assert trainer.global_forward_batches == 0 and len(seen) == 1 and "acc#acc" in seen[0]
    assert any("n_epochs=0: no batch is trained; only the evaluation before training runs, on every batch" in line
               for line in messages(log_records, level=20))
    with pytest.raises(ValueError, match="num_eval_sanity_batch=0 skips the evaluation"):
        trainer.run(num_eval_sanity_batch=0)


@pytest.mark.parametrize("report_to", [42, ["csv", 3]], ids=["int", "list_with_int"])
def test_report_to_that_is_no_name_is_a_clear_error(harness, report_to):
    with pytest.raises(TypeError, match=r"report_to must be a reporter name or a list of them \('csv', "
                                        r"'tensorboard'.*'all' or 'none'\), got"):
        build(harness, n_epochs=1, report_to=report_to)


def test_a_metric_function_returning_text_names_the_metric_and_the_key(harness):
    def rate(preds, labels):
        return {"acc": "high"}

    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, dev(harness), metrics={"quality": rate}, driver=harness.driver_name, verbose=0,
                          input_mapping={"y": "target"})
    with pytest.raises(TypeError, match=r"metrics\['quality'\]: the function .*rate returned \{'acc': 'high'\}; "
                                        r"the value of 'acc' is a str, not a number"):
        evaluator.run()


@pytest.mark.parametrize("name", ["tokens::ids", "__indices__", "__output__"])
def test_a_prediction_name_the_shards_cannot_hold_is_refused_before_writing(harness, tmp_path, name):
    trainer = build(harness, n_epochs=1, evaluate_output_mapping={"pred": name})
    with pytest.raises(ValueError, match=rf"output name '{name}' .* nothing was written"):
        trainer.predict(dev(harness), output_dir=tmp_path / "pred")
    assert not [path for path in (tmp_path / "pred").iterdir() if path.suffix == ".npz"]
    assert name in trainer.predict(dev(harness))  # in memory such a name is fine


@pytest.mark.parametrize("kwargs, words", [
    ({"requeue_signal": signal.SIGKILL, "save_object": "checkpoint"}, "cannot be caught"),
    ({"requeue_signal": "USR1", "save_object": "checkpoint"}, "signal number"),
    ({"requeue_signal": signal.SIGUSR1}, "save_object='checkpoint'"),
])
def test_a_requeue_signal_that_cannot_work_is_refused_when_the_callback_is_built(kwargs, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        CheckpointCallback("checkpoints", **kwargs)
