"""LoadBestModelCallback's temporary folder never outlives the run that made it (framework-free)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from fastcore_train.callbacks import LoadBestModelCallback


def test_a_resumed_runs_own_empty_folder_goes_when_the_checkpoints_folder_replaces_it():
    earlier = Path(tempfile.mkdtemp(prefix="fastcore_best_"))  # the interrupted run's, named by its checkpoint
    (earlier / "model.pt").write_bytes(b"best weights")
    callback = LoadBestModelCallback(monitor="acc")
    callback.save_folder, callback._made_temporary = Path(tempfile.mkdtemp(prefix="fastcore_best_")), True
    made_for_this_run = callback.save_folder
    try:
        callback.on_load_checkpoint(None, {"best": 0.9, "best_batches": 4, "save_folder": str(earlier)})
        assert callback.save_folder == earlier and callback.best_batches == 4
        assert not made_for_this_run.exists()
        assert (earlier / "model.pt").read_bytes() == b"best weights"
    finally:
        for folder in (earlier, made_for_this_run):
            shutil.rmtree(folder, ignore_errors=True)


def test_with_no_best_model_only_a_temporary_folder_goes_never_the_users_save_folder(tmp_path):
    from types import SimpleNamespace

    from fastcore_train.drivers.collectives import Collectives

    trainer = SimpleNamespace(driver=SimpleNamespace(comm=Collectives()))
    users = tmp_path / "best"
    users.mkdir()
    (users / "notes.txt").write_text("keep me")
    given = LoadBestModelCallback(monitor="acc", save_folder=users)
    given.on_train_end(trainer)  # no evaluation gave a value
    given.on_exception(trainer, RuntimeError("x"))
    assert (users / "notes.txt").read_text() == "keep me"
    temporary = LoadBestModelCallback(monitor="acc")
    temporary.save_folder, temporary._made_temporary = Path(tempfile.mkdtemp(prefix="fastcore_best_")), True
    temporary.on_train_end(trainer)
    assert not temporary.save_folder.exists()
