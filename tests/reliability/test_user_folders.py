"""Folders and files of the user's beside a checkpoint are never taken for ours: saving leaves
look-alike names (``ckpt.old-20241126``) alone, loading never renames one into place, and two
trainers writing one folder at the same time are stopped before they mix their files. Runs on
every backend (``--backend``)."""
from __future__ import annotations

import json
import shutil
import threading

import pytest

from fastcore_train.checkpoint import META_FILE, CheckpointTargetError
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import make_trainer
from tests.meta_edits import rewrite_meta


def trainer_for(harness, seed: int = 0, n_epochs: int = 1):
    x, y = make_data(16)
    return make_trainer(harness, harness.make_model(initial_weights(seed=seed)), x, y, n_epochs=n_epochs)


def saved_batches(folder) -> int:
    return json.loads((folder / "trainer_state.json").read_text())["state"]["global_forward_batches"]


@pytest.mark.parametrize("blocking", [True, False])
def test_saving_again_leaves_the_users_look_alike_folders(harness, tmp_path, blocking):
    trainer = trainer_for(harness)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt", blocking=blocking)
    trainer.wait_for_checkpoint()
    shutil.copytree(tmp_path / "ckpt", tmp_path / "ckpt.old-20241126")  # the user's backup copy
    (tmp_path / "ckpt.old-20240101").mkdir()
    (tmp_path / "ckpt.old-20240101" / "README").write_text("my notes")
    trainer.state.global_forward_batches = 99
    trainer.save_checkpoint(tmp_path / "ckpt", blocking=blocking)
    trainer.wait_for_checkpoint()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "ckpt.old-20240101", "ckpt.old-20241126"]
    assert (tmp_path / "ckpt.old-20240101" / "README").read_text() == "my notes"
    assert saved_batches(tmp_path / "ckpt.old-20241126") == 2 and saved_batches(tmp_path / "ckpt") == 99


def test_resuming_a_missing_folder_never_renames_the_users_look_alike(harness, tmp_path):
    trainer = trainer_for(harness)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "runs" / "best.old-v1")
    other = trainer_for(harness, seed=3, n_epochs=2)
    with pytest.raises(FileNotFoundError, match=r"No checkpoint folder at .*runs/best'"):
        other.run(num_eval_sanity_batch=0, resume_from=tmp_path / "runs" / "best")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["best.old-v1"]


def test_two_trainers_saving_to_one_folder_at_once(harness, tmp_path, monkeypatch):
    """The second save is refused, naming the first writer, while the first is still writing in
    the background; the folder then holds the first trainer's checkpoint, whole."""
    from fastcore_train.utils import atomic

    first, second = trainer_for(harness), trainer_for(harness, seed=3)
    first.run(num_eval_sanity_batch=0)
    second.run(num_eval_sanity_batch=0)
    second.state.global_forward_batches = 50
    held, fsync = threading.Event(), atomic._fsync
    monkeypatch.setattr(atomic, "_fsync", lambda path: (held.wait(timeout=60), fsync(path)))
    first.save_checkpoint(tmp_path / "ckpt", blocking=False)  # still writing: its flush is held
    try:
        for blocking in (False, True):
            with pytest.raises(CheckpointTargetError, match=r"is saving one there right now.*folder of its own"):
                second.save_checkpoint(tmp_path / "ckpt", blocking=blocking)
    finally:
        held.set()
    first.wait_for_checkpoint()
    assert saved_batches(tmp_path / "ckpt") == 2 and (tmp_path / "ckpt" / META_FILE).is_file()
    second.save_checkpoint(tmp_path / "ckpt")  # one after the other is fine: the later one replaces it
    second.wait_for_checkpoint()
    assert saved_batches(tmp_path / "ckpt") == 50
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


@pytest.mark.parametrize("resealed", [False, True])
def test_convert_names_a_meta_json_without_its_backend(harness, tmp_path, resealed):
    """Found by meta.json's own checksum, or (made to match) by the missing key itself."""
    from fastcore_train.checkpoint import CheckpointError
    from fastcore_train.convert import convert_checkpoint

    trainer = trainer_for(harness)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    trainer.wait_for_checkpoint()
    meta = json.loads((tmp_path / "ckpt" / META_FILE).read_text())
    del meta["backend"]
    (tmp_path / "ckpt" / META_FILE).write_text(json.dumps(meta))
    if resealed:
        rewrite_meta(tmp_path / "ckpt", meta)
    what = "has no 'backend' entry" if resealed else "does not match its own checksum"
    with pytest.raises(CheckpointError, match=rf"meta.json' {what}.*damaged or edited"):
        convert_checkpoint(tmp_path / "ckpt", tmp_path / "out", to="neutral")
    assert not (tmp_path / "out").exists()
