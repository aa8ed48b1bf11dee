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
