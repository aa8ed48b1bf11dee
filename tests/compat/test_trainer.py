"""fastNLP 1.0's Trainer names and values on every backend (issue 12, items 1 and 5)."""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from fastcore_train import Callback, Event, Metric, RawTextCallback, Trainer
from fastcore_train.log import logger
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer


class Captured(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def log_lines():
    handler = Captured()
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)


class Count(Metric):
    """Counts the samples it is updated with."""

    def __init__(self):
        super().__init__()
        self.register_element("count", 0, aggregate_method="sum")

    def update(self, pred):
        self.count += len(pred)

    def get_metric(self):
        return {"n": int(self.count)}


# ------------------------------------------------------------------ extract_loss_from_outputs
@dataclasses.dataclass
class Output:
    loss: float


def test_extract_loss_from_outputs_reads_dicts_and_dataclasses():
    assert Trainer.extract_loss_from_outputs({"loss": 1.5, "pred": 0}) == 1.5
    assert Trainer.extract_loss_from_outputs(Output(2.5)) == 2.5
    with pytest.raises(KeyError, match="output_mapping"):
        Trainer.extract_loss_from_outputs({"logits": 0})


def test_a_callback_reads_the_loss_with_extract_loss_from_outputs(harness):
    x, y = make_data(24)
    seen = []

    class RecordLoss(Callback):
        def on_before_backward(self, trainer, outputs):
            seen.append(float(trainer.driver.data.to_numeric(trainer.extract_loss_from_outputs(outputs))))

    model = harness.make_model(initial_weights())
    make_trainer(harness, model, x, y, callbacks=[RecordLoss()]).run(num_eval_sanity_batch=0)
    assert len(seen) == 3 and all(np.isfinite(seen))


# ------------------------------------------------------------------ n_epochs=0, num_eval_sanity_batch=-1
def test_n_epochs_zero_runs_only_the_evaluation_before_training(harness):
    x, y = make_data(40)
    model = harness.make_model(initial_weights())
    events = []
    trainer = make_trainer(harness, model, x, y, n_epochs=0, evaluate_dataloaders=harness.make_dataloader(x, y, 8),
                           metrics={"c": Count()})
    trainer.add_callback_fn(Event.on_sanity_check_end(), lambda t, results: events.append(("sanity", results)))
    for name in ("on_train_begin", "on_train_end", "on_train_batch_end"):
        trainer.add_callback_fn(getattr(Event, name)(), lambda t, name=name: events.append((name, None)))
    trainer.run(num_eval_sanity_batch=-1)
    assert events == [("sanity", {"n#c": 40}), ("on_train_begin", None), ("on_train_end", None)]
    assert_weights_equal(harness.get_weights(model), initial_weights())
    assert trainer.global_forward_batches == 0


def test_negative_n_epochs_is_still_an_error(harness):
    x, y = make_data(8)
    with pytest.raises(ValueError, match=r"n_epochs must be a positive int \(or 0\)"):
        make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=-1)


# ------------------------------------------------------------------ n_batches: the run's total
def test_n_batches_is_the_number_of_batches_of_the_run(harness):
    x, y = make_data(40)
    model = harness.make_model(initial_weights())
    assert make_trainer(harness, model, x, y, n_epochs=3).n_batches == 15
    assert make_trainer(harness, model, x, y, n_batches=7).n_batches == 7


# ------------------------------------------------------------------ item 1: accumulation, not silent
def step_batches(harness, num_samples, accumulation_steps, n_epochs=2):
    x, y = make_data(num_samples)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, n_epochs=n_epochs, accumulation_steps=accumulation_steps)
    steps = []
    trainer.add_callback_fn(Event.on_after_optimizers_step(),
                            lambda t, optimizers: steps.append(t.global_forward_batches + 1))
    trainer.run(num_eval_sanity_batch=0)
    return steps


def test_accumulation_groups_stay_in_their_epoch_and_say_so_once(harness, log_lines):
    steps = step_batches(harness, 40, 3)  # 5 batches per epoch
    assert steps == [3, 5, 8, 10]
    warnings = [line for line in log_lines if "accumulation_steps=3" in line]
    assert len(warnings) == 1
    assert "after global batches 3, 5, 8, 10" in warnings[0] and "fastNLP 1.0" in warnings[0]
    assert "after 3, 6, 9" in warnings[0]


def test_accumulation_that_divides_the_epoch_steps_every_k_batches_without_a_warning(harness, log_lines):
    assert step_batches(harness, 48, 3) == [3, 6, 9, 12]  # 6 batches per epoch: fastNLP's steps too
    assert not [line for line in log_lines if "accumulation_steps" in line]


# ------------------------------------------------------------------ fastNLP's progress callbacks
def test_a_progress_callback_among_the_callbacks_replaces_the_default(harness, capsys):
    x, y = make_data(40)
    model = harness.make_model(initial_weights())
    progress = RawTextCallback(print_every=2, loss_round_ndigit=3)
    trainer = Trainer(model, harness.make_dataloader(x, y, 8), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=1, callbacks=[progress], progress_bar="auto")
    assert [cb for cb in trainer.callback_manager.callbacks if cb.callback_name == "progress"] == [progress]
    capsys.readouterr()
    trainer.run(num_eval_sanity_batch=0)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Epoch")]
    assert [line.split("|")[1].strip() for line in lines] == ["batch 2/5", "batch 4/5", "batch 5/5"]
    loss = lines[0].split("|")[2].split()[1]
    assert len(loss.split(".")[1]) == 3


def test_a_checkpoint_inside_an_accumulation_group_says_it_is_not_exact(harness, tmp_path, log_lines):
    x, y = make_data(48)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, n_epochs=1, accumulation_steps=3)
    trainer.add_callback_fn(Event.on_train_batch_end(),
                            lambda t: t.save_checkpoint(tmp_path / f"b{t.global_forward_batches}"))
    trainer.run(num_eval_sanity_batch=0)
    warned = [line for line in log_lines if "inside an accumulation group" in line]
    assert [line.split("after batch ")[1].split(" ")[0] for line in warned] == ["1", "2", "4", "5"]


def test_n_batches_counts_the_capped_epochs_from_the_start_of_run(harness):
    x, y = make_data(40)
    seen = []
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=3)
    trainer.add_callback_fn(Event.on_train_begin(), lambda t: seen.append(t.n_batches))
    trainer.run(num_train_batch_per_epoch=2, num_eval_sanity_batch=0)
    assert seen == [6] and trainer.global_forward_batches == 6


# ------------------------------------------------------------------ Trainer.on, fastNLP's Example 1
def test_trainer_on_example_1_as_fastnlp_writes_it(harness, tmp_path):
    """fastNLP 1.0's ``Trainer.on`` docstring, Example 1, as written there: ``once=True`` is the
    first save only; a gate of ``every=2`` runs on every second batch."""
    from fastcore_train import CheckpointCallback

    calls: dict[str, list[int]] = {"do_something_1": [], "do_something_2": [], "do_something_3": []}

    @Trainer.on(Event.on_save_model())
    def do_something_1(trainer):
        calls["do_something_1"].append(trainer.global_forward_batches)

    @Trainer.on(Event.on_save_model(once=True))
    def do_something_2(trainer):
        calls["do_something_2"].append(trainer.global_forward_batches)

    @Trainer.on(Event.on_train_batch_begin(every=2))
    def do_something_3(trainer, batch, indices):
        calls["do_something_3"].append(trainer.global_forward_batches)

    x, y = make_data(24)  # 3 batches of 8 per epoch
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, n_epochs=3,
                           callbacks=[CheckpointCallback(tmp_path, every_n_epochs=1, save_object="model")])
    trainer.run(num_eval_sanity_batch=0)
    assert calls["do_something_1"] == [3, 6, 9]
    assert calls["do_something_2"] == [3]
    assert calls["do_something_3"] == [1, 3, 5, 7]  # before the 2nd, 4th, ... batch: 1, 3, ... trained


def test_once_false_never_runs_and_says_so():
    with pytest.raises(ValueError, match="once=False never runs"):
        Event.on_save_model(once=False)
