"""TimerCallback, MoreEvaluateCallback and NanGuardCallback on a real backend."""
from __future__ import annotations

import logging

import pytest

from fastcore_train import (Accuracy, CheckpointCallback, CSVLoggerCallback, Evaluator, Metric,
                            MoreEvaluateCallback, NanGuardCallback, NonFiniteLossError, TimerCallback, Trainer,
                            seed_everything)
from fastcore_train.log import logger
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_close, assert_weights_equal, batches_of


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


def shuffled_trainer(harness, callbacks, n_epochs=2, **kwargs):
    x, y = make_data(40, seed=4)
    model = harness.make_model(initial_weights(), dropout=0.3)
    trainer = Trainer(model, harness.make_dataloader(x, y, 8, shuffle=True), harness.make_sgd(model, 0.2),
                      driver=harness.driver_name, n_epochs=n_epochs, progress_bar=None, callbacks=callbacks, **kwargs)
    return trainer, model


# ---------------------------------------------------------------- TimerCallback
def test_timer_counts_every_phase_and_reports(harness, log_lines):
    timer = TimerCallback(print_every=3)
    ex, ey = make_data(10, seed=5)
    trainer, _ = shuffled_trainer(harness, [timer], evaluate_dataloaders=harness.make_dataloader(ex, ey, 5),
                                  metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"})
    trainer.run(num_eval_sanity_batch=0)
    summary = timer.summary()
    for phase in ("forward", "backward", "optimizer step", "zero grad", "train batch"):
        assert summary[phase]["count"] == 10, phase
    assert summary["fetch data"]["count"] == 10 and summary["evaluate"]["count"] == 2
    inner = sum(summary[phase]["total"] for phase in ("forward", "backward", "optimizer step", "zero grad"))
    assert 0 < inner <= summary["train batch"]["total"]
    reports = [line for line in log_lines if line.startswith("Time per phase")]
    assert len(reports) == 3 + 1  # after batches 3, 6, 9 and at the end
    assert "forward" in reports[-1] and "training finished" in reports[-1]


def test_timer_rejects_a_bad_schedule():
    with pytest.raises(ValueError, match="print_every"):
        TimerCallback(print_every=1.5)


# ---------------------------------------------------------------- MoreEvaluateCallback
def test_more_evaluate_runs_on_its_schedule_without_changing_training(harness, tmp_path):
    seed_everything(5)
    plain_trainer, plain_model = shuffled_trainer(harness, [])
    plain_trainer.run(num_eval_sanity_batch=0)

    ex, ey = make_data(23, seed=6)
    extra = MoreEvaluateCallback({"extra": harness.make_dataloader(ex, ey, 5)}, {"acc": Accuracy()},
                                 evaluate_every=3, topk=1, input_mapping={"y": "target"}, topk_monitor="acc", folder=tmp_path / "best")
    csv_log = CSVLoggerCallback(tmp_path / "csv", log_every_n_batches=0)
    evaluated_at: list[int] = []
    seed_everything(5)
    trainer, model = shuffled_trainer(harness, [extra, csv_log])
    original = extra.evaluate
    extra.evaluate = lambda t: (evaluated_at.append(t.global_forward_batches), original(t))[1]
    trainer.run(num_eval_sanity_batch=0)

    assert evaluated_at == [3, 6, 9]
    assert_weights_equal(harness.get_weights(model), harness.get_weights(plain_model))
    # Its last results are those of an Evaluator on the model as it was at batch 9.
    assert set(extra.last_results) == {"acc#acc#extra"}
    rows = (csv_log.run_folder / "more_evaluate_metrics.csv").read_text().splitlines()
    assert rows[0] == "step,epoch,acc#acc#extra" and [row.split(",")[0] for row in rows[1:]] == ["3", "6", "9"]
    saved = list(extra.saver.run_folder.iterdir())
    assert len(saved) == 1 and "acc" in saved[0].name


def test_more_evaluate_results_equal_a_separate_evaluator(harness):
    ex, ey = make_data(23, seed=6)
    extra = MoreEvaluateCallback(harness.make_dataloader(ex, ey, 5), {"acc": Accuracy()}, evaluate_every=-1,
                                 input_mapping={"y": "target"})
    trainer, model = shuffled_trainer(harness, [extra], n_epochs=1)
    trainer.run(num_eval_sanity_batch=0)  # evaluates once, after the only epoch: on the final model
    expected = Evaluator(model, harness.make_dataloader(ex, ey, 7), {"acc": Accuracy()},
                         driver=harness.driver_name, input_mapping={"y": "target"}, verbose=0).run()
    assert extra.last_results == expected


class ScriptedScore(Metric):
    def __init__(self, script):
        super().__init__()
        self.script, self.calls = list(script), 0

    def update(self, pred):
        pass

    def get_metric(self):
        self.calls += 1
        return {"score": self.script[self.calls - 1]}


def test_more_evaluate_follows_the_watched_monitor(harness):
    x, y = make_data(16)
    ex, ey = make_data(10, seed=6)
    extra = MoreEvaluateCallback(harness.make_dataloader(ex, ey, 5), {"acc": Accuracy()}, watch_monitor="score",
                                 num_eval_sanity_batch=0, input_mapping={"y": "target"})
    evaluated_at: list[int] = []
    original = extra.evaluate
    extra.evaluate = lambda t: (evaluated_at.append(t.cur_epoch_idx), original(t))[1]
    model = harness.make_model(initial_weights())
    Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1), driver=harness.driver_name,
            n_epochs=5, evaluate_dataloaders=harness.make_dataloader(x, y, 16),
            metrics={"s": ScriptedScore([0.1, 0.5, 0.3, 0.7, 0.2])}, progress_bar=None,
            callbacks=[extra]).run(num_eval_sanity_batch=0)
    assert evaluated_at == [1, 2, 4]  # the epochs whose score beat every earlier one


def test_more_evaluate_rejects_bad_arguments(harness):
    with pytest.raises(ValueError, match="metrics"):
        MoreEvaluateCallback([], {})
    with pytest.raises(ValueError, match="evaluate_every"):
        MoreEvaluateCallback([], {"acc": Accuracy()}, evaluate_every=0)
    with pytest.raises(ValueError, match="topk_monitor"):
        MoreEvaluateCallback([], {"acc": Accuracy()}, topk=2)


# ---------------------------------------------------------------- NanGuardCallback
def test_nan_guard_stops_before_the_bad_batch_and_keeps_usable_checkpoints(harness, tmp_path):
    x, y = make_data(48, seed=4)
    calls = []

    def poison_fifth_loss(outputs):  # batch 5 (of 6 per epoch) yields a NaN loss, on any backend
        calls.append(1)
        return {"loss": outputs["loss"] * float("nan")} if len(calls) == 5 else outputs

    model = harness.make_model(initial_weights())
    guard = NanGuardCallback(folder=tmp_path / "guard")
    saver = CheckpointCallback(tmp_path / "ckpt", every_n_batches=2, save_object="checkpoint")
    trainer = Trainer(model, harness.make_dataloader(x, y, 8), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=2, progress_bar=None, callbacks=[saver, guard],
                      train_output_mapping=poison_fifth_loss)
    with pytest.raises(NonFiniteLossError) as raised:
        trainer.run(num_eval_sanity_batch=0)
    message = str(raised.value)
    assert "nan" in message and "epoch 1, batch 5" in message and "learning rate" in message
    assert str(guard.saved_to) in message

    # The weights were never touched by the NaN batch: they equal 4 steps of the hand loop (up to
    # float rounding: jittor fuses its lazy graph differently once the guard reads each loss).
    expected = harness.make_model(initial_weights())
    harness.hand_train(expected, harness.make_sgd(expected, 0.1), batches_of(x, y, 8)[:4])
    assert_weights_close(harness.get_weights(model), harness.get_weights(expected))

    # Both the guard's checkpoint and CheckpointCallback's last one (batch 4) load and resume.
    for folder in (guard.saved_to, saver.run_folder / "epoch_1-batch_4"):
        fresh = harness.make_model(initial_weights(seed=3))
        resumed = Trainer(fresh, harness.make_dataloader(x, y, 8), harness.make_sgd(fresh, 0.1),
                          driver=harness.driver_name, n_epochs=1, progress_bar=None)
        resumed.load_checkpoint(folder)
        assert resumed.global_forward_batches == 4
        assert_weights_equal(harness.get_weights(fresh), harness.get_weights(model))


def test_nan_guard_lets_finite_training_through(harness):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=2, progress_bar=None,
                      callbacks=[NanGuardCallback(check_every=2)])
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 8


def test_nan_guard_rejects_a_bad_interval():
    with pytest.raises(ValueError, match="check_every"):
        NanGuardCallback(check_every=0)
