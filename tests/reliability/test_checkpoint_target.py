"""Saving never deletes what is not ours: only an earlier checkpoint (or an empty folder) is replaced.

Runs on every backend (``--backend``): the refusal happens before the driver writes anything,
and a refusal must leave the user's files byte for byte as they were.
"""
from __future__ import annotations

import pytest

from fastcore_train import CheckpointCallback
from fastcore_train.checkpoint import META_FILE, CheckpointTargetError
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import make_trainer


@pytest.fixture
def trainer(harness):
    x, y = make_data(16)
    return make_trainer(harness, harness.make_model(initial_weights()), x, y)


def snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_of_user_files_is_refused_and_left_untouched(trainer, tmp_path):
    folder = tmp_path / "results"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes")
    (folder / "sub" / "data.bin").write_bytes(b"\x00\x01")
    before = snapshot(folder)
    with pytest.raises(CheckpointTargetError, match="not a fastcore_train checkpoint.*left untouched"):
        trainer.save_checkpoint(folder)
    assert snapshot(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]  # no temporary left behind


def test_a_regular_file_is_refused_and_left_untouched(trainer, tmp_path):
    target = tmp_path / "ckpt"
    target.write_text("not a folder")
    with pytest.raises(CheckpointTargetError, match="is a file, not a checkpoint folder"):
        trainer.save_checkpoint(target)
    assert target.read_text() == "not a folder"


def test_a_path_under_a_regular_file_is_refused(trainer, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointTargetError, match="is a file, not a folder"):
        trainer.save_checkpoint(tmp_path / "file" / "ckpt")
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize("target", [".", "..", ""])
def test_the_current_directory_or_above_is_refused(trainer, tmp_path, monkeypatch, target):
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print('mine')")
    monkeypatch.chdir(work)
    with pytest.raises(CheckpointTargetError, match="current directory"):
        trainer.save_checkpoint(target)
    assert (work / "train.py").read_text() == "print('mine')"


def test_an_empty_folder_and_an_earlier_checkpoint_are_written(trainer, tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    trainer.save_checkpoint(folder)
    assert (folder / META_FILE).is_file()
    (folder / "extra.txt").write_text("inside a checkpoint of ours")
    trainer.save_checkpoint(folder)  # replaced: the checkpoint is ours; the file it did not write is kept in the new one
    assert (folder / META_FILE).is_file() and (folder / "extra.txt").read_text() == "inside a checkpoint of ours"
    trainer.wait_for_checkpoint()  # the replaced one is deleted once the new one is on disk
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_checkpoint_callback_folder_under_a_file_fails_before_training(harness, tmp_path):
    (tmp_path / "file").write_text("x")
    x, y = make_data(16)
    callback = CheckpointCallback(folder=tmp_path / "file" / "checkpoints", every_n_batches=1, save_object="checkpoint")
    with pytest.raises(ValueError, match="is a file, not a folder"):  # when the Trainer is built
        make_trainer(harness, harness.make_model(initial_weights()), x, y, callbacks=[callback])
    assert (tmp_path / "file").read_text() == "x"
