"""fastNLP 1.0's callback names and values on every backend (issue 12, item 5)."""
from __future__ import annotations

import pytest

from fastcore_train import (Accuracy, Callback, CheckpointCallback, Event, GradClipCallback, JittorWarmupCallback,
                            MoreEvaluateCallback, OneflowWarmupCallback, PaddleWarmupCallback, TorchGradClipCallback,
                            TorchWarmupCallback, WarmupCallback)
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import SaveAndStop, StopRun, assert_weights_equal, make_trainer


class RecordLr(Callback):
    def __init__(self, harness):
        self.harness, self.lrs = harness, []

    def on_after_optimizers_step(self, trainer, optimizers):
        self.lrs.append(self.harness.lr_of(trainer.driver.optimizers[0]))


def expected_lrs(lr, total, warmup, schedule, k=1):
    """fastNLP 1.0's TorchWarmupCallback schedule, as its docs state it, at each step."""
    fraction = warmup / total if warmup > 1 else warmup
    t_steps = -(-max(2, total) // k) * k
    rates = []
    for batch in range(total):
        if (batch + 1) % k:  # the trainer steps on every k-th batch (k divides the epochs here)
            continue
        progress = (batch + k) / t_steps
        if progress < fraction:
            factor = progress / fraction
        elif schedule == "constant":
            factor = 1.0
        else:
            factor = max((progress - 1) / (fraction - 1), 0.0)
        rates.append(lr * factor)
    return rates


def test_fastnlp_warmup_names_are_the_framework_neutral_callback():
    assert TorchWarmupCallback is PaddleWarmupCallback is JittorWarmupCallback is OneflowWarmupCallback is WarmupCallback
    with pytest.raises(ValueError, match="schedule"):
        WarmupCallback(0.1, "cosine")


@pytest.mark.parametrize("warmup, schedule, k", [(5, "linear", 1), (0.1, "linear", 2), (5, "constant", 1),
                                                 (0.3, "constant", 2)])
def test_warmup_schedules_the_learning_rate(harness, warmup, schedule, k):
    x, y = make_data(64)
    model = harness.make_model(initial_weights())
    record = RecordLr(harness)
    trainer = make_trainer(harness, model, x, y, n_epochs=3, lr=0.1, accumulation_steps=k,
                           callbacks=[TorchWarmupCallback(warmup, schedule), record])
    trainer.run(num_eval_sanity_batch=0)
    assert record.lrs == pytest.approx(expected_lrs(0.1, 24, warmup, schedule, k), rel=1e-5)
    final = harness.lr_of(trainer.driver.optimizers[0])
    assert final == pytest.approx(0.1 if schedule == "constant" else 0.0, abs=0.1 / 24 + 1e-6)


def test_warmup_resumes_its_schedule_from_a_checkpoint(harness, tmp_path):
    x, y = make_data(64)

    def run(callbacks, resume_from=None):
        model = harness.make_model(initial_weights())
        record = RecordLr(harness)
        trainer = make_trainer(harness, model, x, y, n_epochs=2, lr=0.1,
                               callbacks=[WarmupCallback(4, "linear"), record, *callbacks])
        try:
            trainer.run(num_eval_sanity_batch=0, resume_from=resume_from)
        except StopRun:
            pass
        return record.lrs

    straight = run([])
    head = run([SaveAndStop(6, tmp_path / "ckpt")])
    tail = run([], resume_from=tmp_path / "ckpt")
    assert head + tail == pytest.approx(straight, rel=1e-6) and len(tail) == 10


def test_torch_grad_clip_callback_is_grad_clip_on_every_backend(harness):
    x, y = make_data(32)
    weights = []
    for callback in (TorchGradClipCallback(clip_value=0.05, clip_type="norm"), GradClipCallback(0.05, "norm")):
        model = harness.make_model(initial_weights())
        make_trainer(harness, model, x, y, lr=1.0, callbacks=[callback]).run(num_eval_sanity_batch=0)
        weights.append(harness.get_weights(model))
    assert_weights_equal(weights[0], weights[1])
    with pytest.raises(ValueError, match="clip_type"):
        TorchGradClipCallback(clip_type="max")


# ------------------------------------------------------------------ CheckpointCallback / MoreEvaluateCallback values
def evaluated_trainer(harness, callbacks, n_epochs=3):
    x, y = make_data(40, seed=2)
    ex, ey = make_data(16, seed=3)
    model = harness.make_model(initial_weights())
    return make_trainer(harness, model, x, y, n_epochs=n_epochs, callbacks=callbacks,
                        evaluate_dataloaders=harness.make_dataloader(ex, ey, 8), metrics={"acc": Accuracy()},
                        evaluate_input_mapping={"y": "target"}, evaluate_every=-1)


def test_checkpoint_callback_save_object_trainer_writes_resumable_checkpoints(harness, tmp_path):
    saver = CheckpointCallback(tmp_path, every_n_epochs=1, save_object="trainer")
    trainer = evaluated_trainer(harness, [saver], n_epochs=2)
    trainer.run(num_eval_sanity_batch=0)
    assert saver.save_object == "checkpoint"
    folder = saver.run_folder / "epoch_1-batch_5"
    assert (folder / "trainer_state.json").is_file()
    resumed = evaluated_trainer(harness, [], n_epochs=2)
    resumed.load_checkpoint(folder)
    assert resumed.cur_epoch_idx == 1 and resumed.global_forward_batches == 5


@pytest.mark.parametrize("topk, saved", [(-1, 3), (None, 0), (0, 0), (1, 1)])
def test_checkpoint_callback_topk_values(harness, tmp_path, topk, saved):
    saver = CheckpointCallback(tmp_path, topk=topk, monitor="acc")
    evaluated_trainer(harness, [saver]).run(num_eval_sanity_batch=0)
    folders = [p for p in saver.run_folder.iterdir() if "-acc-acc" in p.name] if saver.run_folder.exists() else []
    assert len(folders) == saved  # -1: one per evaluation (3 epochs), None/0: none


def test_more_evaluate_callback_topk_minus_one_with_trainer_checkpoints(harness, tmp_path):
    ex, ey = make_data(16, seed=5)
    more = MoreEvaluateCallback(harness.make_dataloader(ex, ey, 8), {"acc": Accuracy()}, evaluate_every=None,
                                watch_monitor="acc", topk=-1, topk_monitor="acc", folder=tmp_path,
                                save_object="trainer", input_mapping={"y": "target"}, num_eval_sanity_batch=0)
    evaluations = []
    trainer = evaluated_trainer(harness, [more])
    trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, results: evaluations.append(results))
    trainer.run(num_eval_sanity_batch=0)
    saved = sorted(more.saver.run_folder.iterdir())
    improvements = sum(1 for i, r in enumerate(evaluations)
                       if all(r["acc#acc"] > e["acc#acc"] for e in evaluations[:i]))
    assert len(saved) == improvements >= 1
    assert all((folder / "trainer_state.json").is_file() for folder in saved)


def test_warmup_rates_reach_the_optimizer_steps(harness):
    """The scheduled rates are the ones the framework's optimizer steps with: the same weights as
    a hand-written loop stepping plain SGD with those rates."""
    from tests.conformance.helpers import assert_weights_close, batches_of

    x, y = make_data(48)
    model = harness.make_model(initial_weights())
    make_trainer(harness, model, x, y, n_epochs=1, lr=0.5,
                 callbacks=[WarmupCallback(3, "linear")]).run(num_eval_sanity_batch=0)
    reference = harness.make_model(initial_weights())
    for batch, rate in zip(batches_of(x, y, 8), expected_lrs(0.5, 6, 3, "linear")):
        harness.hand_train(reference, harness.make_sgd(reference, rate), [batch])
    assert_weights_close(harness.get_weights(model), harness.get_weights(reference))
