"""Resuming a checkpoint that already reached ``n_epochs`` trains nothing: a warning says so and how to
train more, instead of a silent exit. Runs on every backend (``--backend``)."""
from __future__ import annotations

from fastcore_train import Callback
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer
from tests.reliability.conftest import messages


def finished_checkpoint(harness, folder, n_epochs=2):
    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=n_epochs)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(folder)
    return trainer


def test_resuming_a_finished_run_warns_that_nothing_is_left(harness, tmp_path, log_records):
    done = finished_checkpoint(harness, tmp_path / "ckpt")
    x, y = make_data(16)
    model = harness.make_model(initial_weights(seed=5))
    resumed = make_trainer(harness, model, x, y, n_epochs=2)
    resumed.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    warnings = [line for line in messages(log_records) if "Nothing is left to train" in line]
    assert len(warnings) == 1, messages(log_records)
    assert "2 epoch(s) and 4 batch(es) in all are done" in warnings[0]
    assert "n_epochs=2" in warnings[0] and "larger n_epochs" in warnings[0]
    assert str(tmp_path / "ckpt") in warnings[0]
    assert resumed.global_forward_batches == done.global_forward_batches == 4
    assert_weights_equal(harness.get_weights(model), harness.get_weights(done.model))  # loaded, not trained


def test_a_checkpoint_past_n_epochs_warns_too(harness, tmp_path, log_records):
    finished_checkpoint(harness, tmp_path / "ckpt", n_epochs=3)
    x, y = make_data(16)
    resumed = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=2)
    resumed.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    assert any("Nothing is left to train" in line and "n_epochs=2" in line for line in messages(log_records))
    assert resumed.global_forward_batches == 6


def test_raising_n_epochs_trains_on_without_the_warning(harness, tmp_path, log_records):
    finished_checkpoint(harness, tmp_path / "ckpt")
    x, y = make_data(16)
    resumed = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=3)
    resumed.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    assert resumed.global_forward_batches == 6 and resumed.cur_epoch_idx == 3
    assert not any("Nothing is left" in line for line in messages(log_records))


class SaveAt(Callback):
    def __init__(self, at, folder):
        self.at, self.folder = at, folder

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            trainer.save_checkpoint(self.folder)


def test_a_checkpoint_at_the_last_batch_of_the_last_epoch_warns(harness, tmp_path, log_records):
    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=2,
                           callbacks=[SaveAt(4, tmp_path / "ckpt")])
    trainer.run(num_eval_sanity_batch=0)  # saved after the last batch, before the epoch's end
    resumed = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=2)
    resumed.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    assert any("Nothing is left to train" in line for line in messages(log_records))
    assert resumed.global_forward_batches == 4


def test_a_checkpoint_at_n_batches_says_to_raise_n_batches(harness, tmp_path, log_records):
    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_batches=3)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    resumed = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_batches=3)
    resumed.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    lines = [line for line in messages(log_records) if "Nothing is left to train" in line]
    assert len(lines) == 1 and "n_batches=3" in lines[0] and "larger n_batches" in lines[0]
    assert resumed.global_forward_batches == 3
