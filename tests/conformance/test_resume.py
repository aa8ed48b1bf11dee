"""Exact resume: a run stopped anywhere continues as if it had never stopped."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from fastcore_train import Callback, CheckpointCallback, Event, LRSchedCallback, Trainer, seed_everything
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import SaveAndStop, StopRun, assert_weights_equal

ROOT = Path(__file__).resolve().parents[2]


def build_run(harness, weights_seed: int, losses: dict, callbacks=(), batch_size: int = 8, n_epochs: int = 3,
              n_batches: int = -1):
    """A trainer with shuffling, dropout and a per-batch LR schedule; records each batch's loss."""
    x, y = make_data(60, seed=4)
    model = harness.make_model(initial_weights(weights_seed), dropout=0.3)
    optimizer = harness.make_sgd(model, 0.2, momentum=0.9)
    scheduler = harness.make_lr_scheduler(optimizer)
    trainer = Trainer(model, harness.make_dataloader(x, y, batch_size, shuffle=True), optimizer,
                      driver=harness.driver_name, n_epochs=n_epochs, n_batches=n_batches, progress_bar=None,
                      callbacks=[LRSchedCallback(scheduler, step_on="batch"), *callbacks])
    trainer.add_callback_fn(Event.on_after_backward(), lambda t: losses.__setitem__(
        t.global_forward_batches + 1, t.driver.data.to_numeric(t.last_loss)))
    return trainer, model


def uninterrupted(harness, seed: int, n_epochs: int = 2) -> tuple[dict, object]:
    """The per-batch losses and the model of a :func:`build_run` that never stops, seeded with ``seed``."""
    losses: dict[int, float] = {}
    seed_everything(seed)
    trainer, model = build_run(harness, 0, losses, n_epochs=n_epochs)
    trainer.run(num_eval_sanity_batch=0)
    return losses, model


def assert_same_training(harness, losses: dict, model, expected: tuple[dict, object]) -> None:
    """Bit-identical losses and final weights to those of ``expected`` (from :func:`uninterrupted`)."""
    assert losses == expected[0]
    assert_weights_equal(harness.get_weights(model), harness.get_weights(expected[1]))


def test_stop_twice_in_an_epoch_and_resume_is_bit_identical(harness, tmp_path):
    # 60 samples, batch 8: 8 batches per epoch (the last one short); epoch 1 holds batches 9-16.
    straight = uninterrupted(harness, 123, n_epochs=3)

    losses: dict[int, float] = {}
    seed_everything(123)
    trainer, _ = build_run(harness, 0, losses, [SaveAndStop(11, tmp_path / "first")])
    with pytest.raises(StopRun):
        trainer.run(num_eval_sanity_batch=0)

    # Resume from other initial weights: everything must come from the checkpoint.
    trainer, _ = build_run(harness, 9, losses, [SaveAndStop(14, tmp_path / "second")])
    with pytest.raises(StopRun):
        trainer.run(num_eval_sanity_batch=0, resume_from=tmp_path / "first")

    trainer, resumed = build_run(harness, 9, losses)
    trainer.run(num_eval_sanity_batch=0, resume_from=tmp_path / "second")

    assert trainer.global_forward_batches == 24 and trainer.cur_epoch_idx == 3
    assert_same_training(harness, losses, resumed, straight)


def test_resume_from_a_checkpoint_callback_folder(harness, tmp_path):
    straight = uninterrupted(harness, 7)

    losses: dict[int, float] = {}
    seed_everything(7)
    saver = CheckpointCallback(tmp_path, every_n_batches=5, save_object="checkpoint")
    trainer, _ = build_run(harness, 0, losses, [saver, SaveAndStop(12, tmp_path / "ignored")], n_epochs=2)
    with pytest.raises(StopRun):
        trainer.run(num_eval_sanity_batch=0)
    assert sorted(p.name for p in saver.run_folder.iterdir()) == ["epoch_1-batch_5", "epoch_2-batch_10"]

    trainer, resumed = build_run(harness, 9, losses, n_epochs=2)
    trainer.run(num_eval_sanity_batch=0, resume_from=saver.run_folder / "epoch_2-batch_10")
    assert_same_training(harness, losses, resumed, straight)


class StopTrainingAt(Callback):
    """Call ``trainer.stop_training()`` after each global batch in ``at``: run() returns normally."""

    def __init__(self, *at: int) -> None:
        self.at = at

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches in self.at:
            trainer.stop_training()


class RaiseAt(Callback):
    """Raise :class:`StopRun` after global batch ``at``, saving nothing (the user catches it)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            raise StopRun(self.at)


def count_epoch_ends(trainer, ends: list) -> None:
    trainer.add_callback_fn(Event.on_train_epoch_end(), lambda t: ends.append(t.global_forward_batches))


@pytest.mark.parametrize("how", ["n_batches", "stop_training", "exception"])
def test_a_checkpoint_saved_after_run_stopped_mid_epoch_resumes_the_rest_of_that_epoch(harness, tmp_path, how):
    # 8 batches per epoch: batch 11 is the 3rd of epoch 1, so the stop leaves that epoch open.
    straight = uninterrupted(harness, 5)

    losses: dict[int, float] = {}
    ends: list[int] = []
    seed_everything(5)
    stopper = {"n_batches": [], "stop_training": [StopTrainingAt(11)], "exception": [RaiseAt(11)]}[how]
    trainer, _ = build_run(harness, 0, losses, stopper, n_epochs=2, n_batches=11 if how == "n_batches" else -1)
    count_epoch_ends(trainer, ends)
    try:
        trainer.run(num_eval_sanity_batch=0)
    except StopRun:  # the user handles the error, then saves
        assert how == "exception"
    assert (trainer.global_forward_batches, trainer.cur_epoch_idx, trainer.batch_idx_in_epoch) == (11, 1, 3)
    trainer.save_checkpoint(tmp_path / "ckpt")  # after run() returned

    trainer, resumed = build_run(harness, 9, losses, n_epochs=2)
    count_epoch_ends(trainer, ends)
    trainer.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    assert trainer.global_forward_batches == 16 and trainer.cur_epoch_idx == 2
    assert ends == [8, 16], "an epoch ends once, when its last batch is trained"
    assert_same_training(harness, losses, resumed, straight)


def test_run_again_after_a_mid_epoch_stop_continues_that_epoch(harness):
    straight = uninterrupted(harness, 5)

    losses: dict[int, float] = {}
    seed_everything(5)
    trainer, model = build_run(harness, 0, losses, [StopTrainingAt(5, 11)], n_epochs=2)
    for _ in range(3):
        trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 16 and trainer.cur_epoch_idx == 2
    assert_same_training(harness, losses, model, straight)


def test_a_checkpoint_saved_between_load_checkpoint_and_run_resumes_the_same_position(harness, tmp_path):
    straight = uninterrupted(harness, 5)

    losses: dict[int, float] = {}
    seed_everything(5)
    trainer, _ = build_run(harness, 0, losses, [StopTrainingAt(11)], n_epochs=2)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "first")
    trainer, _ = build_run(harness, 9, losses, n_epochs=2)
    trainer.load_checkpoint(tmp_path / "first")
    trainer.save_checkpoint(tmp_path / "second")  # nothing trained in between: the same position

    trainer, resumed = build_run(harness, 9, losses, n_epochs=2)
    trainer.run(num_eval_sanity_batch=0, resume_from=tmp_path / "second")
    assert_same_training(harness, losses, resumed, straight)


@pytest.mark.parametrize("stop_at, new_batch_size", [(3, 5), (2, 13), (5, 1), (7, 8)])
def test_resume_with_another_batch_size_sees_each_remaining_sample_once(harness, tmp_path, stop_at, new_batch_size):
    x, y = make_data(60, seed=4)
    seen: list[int] = []

    def record(trainer, batch, indices):
        seen.extend(harness.indices_of(batch))

    def trainer_for(batch_size, callbacks=()):
        model = harness.make_model(initial_weights())
        trainer = Trainer(model, harness.make_dataloader(x, y, batch_size, shuffle=True, with_index=True),
                          harness.make_sgd(model, 0.1), driver=harness.driver_name, n_epochs=1,
                          progress_bar=None, callbacks=list(callbacks))
        trainer.add_callback_fn(Event.on_train_batch_begin(), record)
        return trainer

    with pytest.raises(StopRun):
        trainer_for(8, [SaveAndStop(stop_at, tmp_path / "ckpt")]).run(num_eval_sanity_batch=0)
    assert len(seen) == stop_at * 8
    trainer_for(new_batch_size).run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    assert Counter(seen) == Counter(range(60)), "every sample exactly once over the interrupted epoch"


KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from fastcore_train import Trainer
    from tests.conformance.harnesses.{backend} import Harness
    from tests.conformance.harnesses.base import initial_weights, make_data

    harness = Harness()
    x, y = make_data(32)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 8), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=1, progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)
    folder = Path({folder!r})
    trainer.save_checkpoint(folder)
    trainer.run(num_eval_sanity_batch=0)  # n_epochs is reached: train one more epoch below
    trainer.n_epochs = 2
    trainer.run(num_eval_sanity_batch=0)

    def slow_model_save(staging):
        (staging / "model-part").write_bytes(b"half a model")
        print("WRITING", flush=True)
        time.sleep(120)

    trainer.save_checkpoint(folder, model_save_fn=slow_model_save)
""")


def test_a_writer_killed_mid_write_leaves_the_previous_checkpoint_loadable(harness, tmp_path):
    folder = tmp_path / "ckpt"
    script = KILLED_WRITER.format(root=str(ROOT), backend=harness.driver_name, folder=str(folder))
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.monotonic() + 240
        line = ""
        while "WRITING" not in line and time.monotonic() < deadline:
            line = writer.stdout.readline()
            if not line and writer.poll() is not None:
                break
        assert "WRITING" in line, writer.stderr.read()
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == -signal.SIGKILL

    x, y = make_data(32)
    model = harness.make_model(initial_weights(seed=5))
    trainer = Trainer(model, harness.make_dataloader(x, y, 8), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=2, progress_bar=None)
    trainer.load_checkpoint(folder)
    assert trainer.global_forward_batches == 4 and trainer.cur_epoch_idx == 1

    reference = harness.make_model(initial_weights())
    Trainer(reference, harness.make_dataloader(x, y, 8), harness.make_sgd(reference, 0.1),
            driver=harness.driver_name, n_epochs=1, progress_bar=None).run(num_eval_sanity_batch=0)
    assert_weights_equal(harness.get_weights(model), harness.get_weights(reference))
