"""``CheckpointCallback(topk=k)`` keeps one coherent set of the k best checkpoints, and "best",
across any resume: from ``last``, from a top-k folder, from an exception checkpoint, and from a
``last`` written before it recorded its epoch's own result. Runs on every backend (``--backend``)."""
from __future__ import annotations

import json
import logging

import pytest

from fastcore_train import Callback, CheckpointCallback
from fastcore_train.checkpoint import CALLBACK_STATE_FILE, META_FILE
from fastcore_train.checkpoint.checksums import file_checksums
from tests.conformance.test_callbacks import scripted_trainer
from tests.meta_edits import rewrite_meta
from tests.reliability.conftest import messages

FIRST_RUN = [0.1, 0.5, 0.7]   # epochs 1-3: top-2 is epochs 3 and 2
RESUMED = [0.3, 0.6]          # epochs 4-5: top-2 becomes epochs 3 and 5
EXPECTED = ["epoch_3-batch_12-score-s_0.7", "epoch_5-batch_20-score-s_0.6"]


def saver(tmp_path, **kwargs):
    return CheckpointCallback(tmp_path, last=True, topk=2, save_object="checkpoint", **kwargs)


def first_run(harness, tmp_path, **kwargs):
    callback = saver(tmp_path, **kwargs)
    trainer, _ = scripted_trainer(harness, FIRST_RUN, [callback])
    trainer.run(num_eval_sanity_batch=0)
    return callback


def top_k_folders(callback):
    return sorted(p.name for p in callback.run_folder.iterdir() if "score" in p.name)


def resume(harness, tmp_path, folder, script=RESUMED):
    callback = saver(tmp_path)
    trainer, _ = scripted_trainer(harness, script, [callback], n_epochs=5)
    trainer.run(num_eval_sanity_batch=0, resume_from=folder)
    return callback


@pytest.mark.parametrize("async_save", [False, True])
def test_last_holds_its_epochs_own_top_k_result(harness, tmp_path, async_save):
    callback = first_run(harness, tmp_path, async_save=async_save)
    states = json.loads((callback.run_folder / "last" / CALLBACK_STATE_FILE).read_text())
    state = next(value for key, value in states.items() if key.startswith("CheckpointCallback"))
    assert [name for _, name in state["topk_saved"]] == ["epoch_3-batch_12-score-s_0.7", "epoch_2-batch_8-score-s_0.5"]
    assert state["best"] == 0.7


def test_resuming_from_last_keeps_k_folders(harness, tmp_path):
    callback = first_run(harness, tmp_path)
    resumed = resume(harness, tmp_path, callback.run_folder / "last")
    assert resumed.run_folder == callback.run_folder
    assert top_k_folders(resumed) == EXPECTED
    assert [name for _, name in resumed.topk_saved] == [EXPECTED[0], EXPECTED[1]] and resumed.tracker.best == 0.7


def test_resuming_from_a_top_k_folder_keeps_k_folders(harness, tmp_path):
    callback = first_run(harness, tmp_path)
    resumed = resume(harness, tmp_path, callback.run_folder / "epoch_3-batch_12-score-s_0.7")
    assert top_k_folders(resumed) == EXPECTED


class CrashAt(Callback):
    def __init__(self, batch: int) -> None:
        self.batch = batch

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.batch:
            raise RuntimeError("power cut")


def test_resuming_from_an_exception_checkpoint_keeps_k_folders(harness, tmp_path):
    callback = CheckpointCallback(tmp_path, last=True, topk=2, save_object="checkpoint", on_exceptions=RuntimeError)
    trainer, _ = scripted_trainer(harness, FIRST_RUN + [0.3], [callback, CrashAt(14)], n_epochs=5)
    with pytest.raises(RuntimeError, match="power cut"):
        trainer.run(num_eval_sanity_batch=0)
    resumed = resume(harness, tmp_path, callback.run_folder / "exception_RuntimeError")
    assert top_k_folders(resumed) == EXPECTED


def test_a_last_written_without_its_epochs_result_is_reconciled(harness, tmp_path, log_records):
    """A ``last`` from before the fix listed the top-k without its own epoch's result: the folder of
    that result is counted again on resume (with a warning), so no folder is orphaned."""
    callback = first_run(harness, tmp_path)
    last = callback.run_folder / "last"
    states = json.loads((last / CALLBACK_STATE_FILE).read_text())
    key = next(key for key in states if key.startswith("CheckpointCallback"))
    states[key]["topk_saved"] = [[0.5, "epoch_2-batch_8-score-s_0.5"], [0.1, "epoch_1-batch_4-score-s_0.1"]]
    states[key]["best"] = None
    (last / CALLBACK_STATE_FILE).write_text(json.dumps(states))
    meta = json.loads((last / META_FILE).read_text())
    meta["checksums"] = file_checksums(last)
    rewrite_meta(last, meta)
    resumed = resume(harness, tmp_path, last)
    assert top_k_folders(resumed) == EXPECTED
    warned = [line for line in messages(log_records, logging.WARNING) if "counted again" in line]
    assert len(warned) == 1 and "epoch_3-batch_12-score-s_0.7" in warned[0]
