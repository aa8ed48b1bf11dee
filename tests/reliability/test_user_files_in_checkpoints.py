"""A file of the user's inside one of our checkpoint folders (``best/NOTES.md``, a ``model.onnx``
exported into ``last`` or a top-k folder) is never deleted by the next save or an eviction: a
replaced checkpoint's foreign files move into the one that replaces it, a dropped top-k folder
keeps them (only the checkpoint's own files go), and a warning names them. Runs on every backend
(``--backend``)."""
from __future__ import annotations

import json

import pytest

from fastcore_train import Callback, CheckpointCallback
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import make_trainer
from tests.conformance.test_callbacks import scripted_trainer
from tests.reliability.conftest import messages

NOTES = "what I tried in this run"


@pytest.mark.parametrize("blocking", [True, False])
def test_saving_again_keeps_the_users_files_in_the_checkpoint(harness, tmp_path, blocking, log_records):
    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y)
    trainer.run(num_eval_sanity_batch=0)
    best = tmp_path / "best"
    trainer.save_checkpoint(best, blocking=blocking)
    trainer.wait_for_checkpoint()
    (best / "NOTES.md").write_text(NOTES)
    (best / "exports").mkdir()
    (best / "exports" / "model.onnx").write_bytes(b"\x08\x07onnx")
    trainer.state.global_forward_batches = 9
    trainer.save_checkpoint(best, blocking=blocking)
    trainer.wait_for_checkpoint()
    assert (best / "NOTES.md").read_text() == NOTES
    assert (best / "exports" / "model.onnx").read_bytes() == b"\x08\x07onnx"
    assert json.loads((best / "trainer_state.json").read_text())["state"]["global_forward_batches"] == 9
    warned = [line for line in messages(log_records) if "did not write" in line]
    assert len(warned) == 1 and "NOTES.md" in warned[0] and "exports/model.onnx" in warned[0], warned
    other = make_trainer(harness, harness.make_model(initial_weights(seed=3)), x, y)
    other.load_checkpoint(best)  # the kept files are not part of the checkpoint: it loads
    assert other.global_forward_batches == 9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]


class ExportAfterFirstEvaluation(Callback):
    """What a user does: export ``model.onnx`` into the checkpoint folders written so far."""

    def __init__(self, saver: CheckpointCallback) -> None:
        self.saver = saver

    def on_evaluate_end(self, trainer, results):
        if trainer.cur_epoch_idx == 1 and trainer.driver.comm.is_global_zero():
            trainer.wait_for_checkpoint()
            for folder in self.saver.run_folder.iterdir():
                (folder / "model.onnx").write_text(f"exported from {folder.name}")


@pytest.mark.parametrize("save_object,async_save", [("checkpoint", False), ("checkpoint", True), ("model", False)])
def test_eviction_and_last_keep_an_exported_file(harness, tmp_path, save_object, async_save, log_records):
    saver = CheckpointCallback(tmp_path, last=True, topk=1, save_object=save_object, async_save=async_save)
    trainer, _ = scripted_trainer(harness, [0.1, 0.5, 0.7], [saver, ExportAfterFirstEvaluation(saver)])
    trainer.run(num_eval_sanity_batch=0)
    run = saver.run_folder
    dropped = run / "epoch_1-batch_4-score-s_0.1"
    assert [p.name for p in dropped.iterdir()] == ["model.onnx"]  # only the checkpoint's own files went
    assert (dropped / "model.onnx").read_text() == f"exported from {dropped.name}"
    assert (run / "last" / "model.onnx").read_text() == "exported from last"
    assert sorted(p.name for p in run.iterdir()) == ["epoch_1-batch_4-score-s_0.1", "epoch_3-batch_12-score-s_0.7",
                                                     "last"]
    warned = [line for line in messages(log_records) if "did not write" in line]
    assert any(dropped.name in line and "model.onnx" in line for line in warned), warned
