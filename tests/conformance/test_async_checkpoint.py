"""Driver conformance: asynchronous checkpoints (``save_checkpoint(..., blocking=False)``).

The background write is observed through a hook around ``driver.io.write_object`` (the call that
writes a snapshot with the framework's own save): the framework still writes the real files.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fastcore_train import CheckpointCallback, Callback
from fastcore_train.checkpoint.async_writer import AsyncCheckpointError
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer

ROOT = Path(__file__).resolve().parents[2]


def files_of(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def trained(harness, n_epochs: int = 1, **kwargs):
    x, y = make_data(32)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, n_epochs=n_epochs,
                           optimizers=harness.make_sgd(model, 0.1, momentum=0.9), **kwargs)
    return trainer, model


def hook_writes(trainer, before=None):
    """Wrap the driver's snapshot writer: ``before(path)`` runs before each file is written."""
    io = trainer.driver.io
    write = io.write_object

    def hooked(obj, target):  # a path, or a file object (hashed while written) named by its path
        if before is not None:
            before(Path(target if isinstance(target, (str, os.PathLike)) else target.name))
        write(obj, target)

    io.write_object = hooked


def test_an_async_save_equals_a_sync_save_byte_for_byte(harness, tmp_path):
    trainer, _ = trained(harness)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "sync")
    trainer.save_checkpoint(tmp_path / "async", blocking=False)
    trainer.wait_for_checkpoint()
    sync, background = (harness.canonical_checkpoint(files_of(tmp_path / name)) for name in ("sync", "async"))
    assert sorted(sync) == sorted(background)
    for name in sync:
        assert sync[name] == background[name], f"{name} differs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["async", "sync"], "no temporary folder is left"


class SaveDuringTraining(Callback):
    """An async save after batch ``at``; its write waits until training has gone ``ahead`` batches on."""

    def __init__(self, folder: Path, at: int, ahead: int) -> None:
        self.folder, self.at, self.ahead = folder, at, ahead
        self.released = threading.Event()
        self.batches_during_write: list[int] = []
        self.weights_at_save = None

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            self.weights_at_save = self.harness.get_weights(self.model)
            hook_writes(trainer, self.wait_for_training)
            trainer.save_checkpoint(self.folder, blocking=False)
        elif trainer.global_forward_batches >= self.at + self.ahead:
            self.released.set()

    def wait_for_training(self, path: Path) -> None:
        released = self.released.wait(timeout=120)
        self.batches_during_write.append(released)


def test_training_goes_on_while_the_checkpoint_is_written_and_the_snapshot_is_of_the_save_point(harness, tmp_path):
    saver = SaveDuringTraining(tmp_path / "ckpt", at=2, ahead=3)
    trainer, model = trained(harness, n_epochs=2, callbacks=[saver])  # 4 batches an epoch
    saver.harness, saver.model = harness, model
    trainer.run(num_eval_sanity_batch=0)
    # The write could start only once training had gone 3 batches past the save point.
    assert saver.batches_during_write and all(saver.batches_during_write)
    state = json.loads((tmp_path / "ckpt" / "trainer_state.json").read_text())
    assert state["state"]["global_forward_batches"] == 2
    other, _ = trained(harness)
    other.load_checkpoint(tmp_path / "ckpt")
    assert_weights_equal(harness.get_weights(other.driver.unwrap_model()), saver.weights_at_save)


class SlowSnapshot(Callback):
    """An async save after batch ``at`` whose host copy takes ``delay`` seconds (where the backend copies
    beside training, on the writer's thread; elsewhere on the training thread)."""

    def __init__(self, folder: Path, at: int, delay: float) -> None:
        self.folder, self.at, self.delay = folder, at, delay
        self.weights_at_save = None

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            self.weights_at_save = self.harness.get_weights(self.model)
            io = trainer.driver.io
            copy = io.host_copy

            def slow_copy(obj):
                time.sleep(self.delay)
                return copy(obj)

            io.host_copy = slow_copy
            trainer.save_checkpoint(self.folder, blocking=False)


def test_the_next_optimizer_step_waits_for_the_snapshot(harness, tmp_path):
    """However long the copy takes, training does not change the parameters or the optimizer state
    before it is taken: the checkpoint holds the state of its save point."""
    saver = SlowSnapshot(tmp_path / "ckpt", at=2, delay=0.5)
    trainer, model = trained(harness, n_epochs=1, callbacks=[saver])
    saver.harness, saver.model = harness, model
    trainer.run(num_eval_sanity_batch=0)
    other, _ = trained(harness)
    other.load_checkpoint(tmp_path / "ckpt")
    assert other.global_forward_batches == 2
    assert_weights_equal(harness.get_weights(other.driver.unwrap_model()), saver.weights_at_save)
    reference, reference_model = trained(harness, n_epochs=1)
    reference.run(num_eval_sanity_batch=0)
    assert_weights_equal(harness.get_weights(model), harness.get_weights(reference_model))  # and was not disturbed


def test_a_blocking_save_keeps_the_checkpoint_it_replaces_until_the_new_one_is_on_disk(harness, tmp_path, monkeypatch):
    """The flush to disk runs after publishing, on the writer's thread; until it is done, the replaced
    checkpoint stays beside the new one (what a power cut in between would leave)."""
    from fastcore_train.utils import atomic

    trainer, _ = trained(harness)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    trainer.wait_for_checkpoint()
    released = threading.Event()
    fsync = atomic._fsync

    def held_fsync(path):
        released.wait(timeout=60)
        fsync(path)

    monkeypatch.setattr(atomic, "_fsync", held_fsync)
    trainer.state.global_forward_batches = 77
    trainer.save_checkpoint(tmp_path / "ckpt")  # returns before anything is flushed
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[1] == "ckpt" and len(names) == 2 and names[0].startswith(".ckpt.old-")
    assert json.loads((tmp_path / "ckpt" / "trainer_state.json").read_text())["state"]["global_forward_batches"] == 77
    assert json.loads((tmp_path / names[0] / "trainer_state.json").read_text())["state"]["global_forward_batches"] == 4
    released.set()
    trainer.wait_for_checkpoint()
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_a_second_save_waits_for_the_first(harness, tmp_path):
    trainer, _ = trained(harness)
    trainer.run(num_eval_sanity_batch=0)
    started: list[str] = []
    first_published_when_second_started = []

    def slow_first(path: Path) -> None:
        started.append(path.parent.name.split(".")[1])
        if started == ["first"]:
            time.sleep(0.3)  # the second save comes while this write is still going
        if started[-1] == "second" and not first_published_when_second_started:
            first_published_when_second_started.append((tmp_path / "first" / "meta.json").is_file())

    hook_writes(trainer, slow_first)
    trainer.save_checkpoint(tmp_path / "first", blocking=False)
    trainer.save_checkpoint(tmp_path / "second", blocking=False)
    trainer.wait_for_checkpoint()
    assert started == ["first", "first", "second", "second"]
    assert first_published_when_second_started == [True]


def test_a_failed_background_write_is_raised_by_the_next_save_and_leaves_the_previous_checkpoint(harness, tmp_path):
    trainer, _ = trained(harness)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    before = files_of(tmp_path / "ckpt")

    def disk_full(path: Path) -> None:
        raise OSError(28, "No space left on device")

    hook_writes(trainer, disk_full)
    trainer.save_checkpoint(tmp_path / "ckpt", blocking=False)  # returns: the error is in the background
    with pytest.raises(AsyncCheckpointError, match="No space left on device"):
        trainer.save_checkpoint(tmp_path / "other")
    assert files_of(tmp_path / "ckpt") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"], "the failed write's temporary folder is removed"
    trainer.wait_for_checkpoint()  # the error was raised once, not kept


def test_the_run_raises_a_failed_write_of_checkpoint_callback_at_its_end(harness, tmp_path):
    callback = CheckpointCallback(tmp_path, every_n_batches=2, save_object="checkpoint", async_save=True)
    trainer, _ = trained(harness, callbacks=[callback])

    def disk_full(path: Path) -> None:
        if trainer.global_forward_batches >= 4:
            raise OSError(28, "No space left on device")

    hook_writes(trainer, disk_full)
    with pytest.raises(AsyncCheckpointError, match="No space left on device"):
        trainer.run(num_eval_sanity_batch=0)


def test_checkpoint_callback_async_resumes_like_an_uninterrupted_run(harness, tmp_path):
    uninterrupted, model = trained(harness, n_epochs=3)
    uninterrupted.run(num_eval_sanity_batch=0)
    callback = CheckpointCallback(tmp_path, every_n_epochs=1, save_object="checkpoint", async_save=True)
    first, _ = trained(harness, n_epochs=1, callbacks=[callback])
    first.run(num_eval_sanity_batch=0)
    [saved] = [path for path in tmp_path.rglob("meta.json")]  # published by the time run() returned
    resumed, resumed_model = trained(harness, n_epochs=3)
    resumed.run(num_eval_sanity_batch=0, resume_from=saved.parent)
    assert_weights_equal(harness.get_weights(resumed_model), harness.get_weights(model))


def test_async_save_options_that_write_the_live_model_are_refused(harness, tmp_path):
    with pytest.raises(ValueError, match="save_object='checkpoint'"):
        CheckpointCallback(tmp_path, every_n_epochs=1, async_save=True)  # save_object="model"
    trainer, _ = trained(harness)
    with pytest.raises(ValueError, match="model_save_fn or only_state_dict=False"):
        trainer.save_checkpoint(tmp_path / "ckpt", only_state_dict=False, blocking=False)
    assert not (tmp_path / "ckpt").exists()


KILLED_JOB = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.conformance.harnesses.{backend} import Harness
from tests.conformance.test_async_checkpoint import trained, hook_writes
harness, folder = Harness(), Path({folder!r})
trainer, _ = trained(harness, n_epochs=1)
trainer.run(num_eval_sanity_batch=0)
trainer.save_checkpoint(folder)  # the good checkpoint, after 4 batches
def hang(path):
    if path.name.startswith("training_state"):  # the model file is already written
        print("WRITING", flush=True)
        time.sleep(600)
hook_writes(trainer, hang)
trainer.state.global_forward_batches = 99
trainer.save_checkpoint(folder, blocking=False)
time.sleep(600)
"""


def test_a_sigkill_during_an_async_write_leaves_the_previous_checkpoint_loadable(harness, tmp_path):
    backend = type(harness).__module__.rsplit(".", 1)[-1]
    script = KILLED_JOB.format(root=str(ROOT), backend=backend, folder=str(tmp_path / "ckpt"))
    job = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        line = ""
        while "WRITING" not in line and time.monotonic() < deadline and job.poll() is None:
            line = job.stdout.readline()
        assert "WRITING" in line, job.stderr.read()[-3000:] if job.poll() is not None else "no WRITING line"
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
    assert any(p.name.startswith(".ckpt.tmp-") for p in tmp_path.iterdir()), "the write was under way"
    trainer, _ = trained(harness)
    trainer.load_checkpoint(tmp_path / "ckpt")
    assert trainer.global_forward_batches == 4
    trainer.save_checkpoint(tmp_path / "ckpt")  # the dead writer's temporary folder is cleared
    trainer.wait_for_checkpoint()  # (and the replaced checkpoint deleted, once the new one is on disk)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
