"""CheckpointCallback, LoadBestModelCallback and EarlyStopCallback on a real backend."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fastcore_train import (CheckpointCallback, EarlyStopCallback, Event, LoadBestModelCallback, Metric,
                            Trainer)
from tests.conformance.harnesses.base import initial_weights, make_data


class ScriptedScore(Metric):
    """Reports the next value of a fixed script at each evaluation, so tests choose what improves."""

    def __init__(self, script):
        super().__init__()
        self.script = list(script)
        self.evaluations = 0

    def update(self, pred):
        pass

    def get_metric(self):
        value = self.script[self.evaluations]
        self.evaluations += 1
        return {"score": value}


def scripted_trainer(harness, script, callbacks, n_epochs=None, **kwargs):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=n_epochs or len(script),
                      evaluate_dataloaders=harness.make_dataloader(x, y, 16), metrics={"s": ScriptedScore(script)},
                      evaluate_every=-1, monitor="score", progress_bar=None, callbacks=callbacks, **kwargs)
    return trainer, model


def test_checkpoint_callback_layout_and_topk_retention(harness, tmp_path):
    saver = CheckpointCallback(tmp_path, every_n_epochs=2, last=True, topk=2, save_object="checkpoint")
    trainer, _ = scripted_trainer(harness, [0.1, 0.5, 0.3, 0.7, 0.2], [saver])
    trainer.run(num_eval_sanity_batch=0)
    assert [p.name for p in tmp_path.iterdir()] == [saver.run_folder.name]
    names = sorted(p.name for p in saver.run_folder.iterdir())
    assert names == sorted(["epoch_2-batch_8", "epoch_4-batch_16", "last",
                            "epoch_2-batch_8-score-s_0.5", "epoch_4-batch_16-score-s_0.7"])
    best = saver.run_folder / "epoch_4-batch_16-score-s_0.7"
    assert json.loads((best / "evaluate_results.json").read_text()) == {"score#s": 0.7}
    assert (best / "meta.json").is_file() and (saver.run_folder / "last" / "meta.json").is_file()
    last_state = json.loads((saver.run_folder / "last" / "trainer_state.json").read_text())
    assert last_state["state"]["cur_epoch_idx"] == 5


def test_checkpoint_callback_last_is_where_a_run_stopped_inside_an_epoch(harness, tmp_path):
    saver = CheckpointCallback(tmp_path, last=True, save_object="checkpoint")
    trainer, _ = scripted_trainer(harness, [0.1, 0.2], [saver], n_batches=6)  # 4 batches per epoch
    trainer.run(num_eval_sanity_batch=0)
    last_state = json.loads((saver.run_folder / "last" / "trainer_state.json").read_text())["state"]
    assert (last_state["global_forward_batches"], last_state["cur_epoch_idx"], last_state["batch_idx_in_epoch"]) \
        == (6, 1, 2)


def test_checkpoint_callback_saves_models_by_default(harness, tmp_path):
    saver = CheckpointCallback(tmp_path, every_n_batches=3)
    trainer, _ = scripted_trainer(harness, [0.1, 0.2], [saver])
    trainer.run(num_eval_sanity_batch=0)
    suffix = trainer.driver.io.model_file_suffix
    assert sorted(p.name for p in saver.run_folder.iterdir()) == ["epoch_1-batch_3", "epoch_2-batch_6"]
    assert [p.name for p in (saver.run_folder / "epoch_1-batch_3").iterdir()] == [f"model{suffix}"]


def test_checkpoint_callback_on_exception(harness, tmp_path):
    saver = CheckpointCallback(tmp_path, on_exceptions=RuntimeError)
    trainer, _ = scripted_trainer(harness, [0.1], [saver])

    def fail(trainer):
        raise RuntimeError("disk full")

    trainer.add_callback_fn(Event.on_train_batch_end(once=2), fail)
    with pytest.raises(RuntimeError):
        trainer.run(num_eval_sanity_batch=0)
    assert [p.name for p in saver.run_folder.iterdir()] == ["exception_RuntimeError"]


@pytest.mark.parametrize("only_state_dict", [True, False])
def test_load_best_model_restores_the_best_weights(harness, only_state_dict, recwarn):
    weights_at_evaluation = []
    best = LoadBestModelCallback(only_state_dict=only_state_dict)  # False: a whole model it wrote, trusted
    trainer, model = scripted_trainer(harness, [0.2, 0.9, 0.4, 0.6], [best])
    trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, r: weights_at_evaluation.append(harness.get_weights(model)))
    trainer.run(num_eval_sanity_batch=0)
    final = harness.get_weights(model)
    for name, value in weights_at_evaluation[1].items():
        np.testing.assert_array_equal(final[name], value)
    assert not np.array_equal(final["w1"], weights_at_evaluation[-1]["w1"])
    assert not best.save_folder.exists(), "the temporary copy is deleted after training"


def test_early_stop_after_patience_evaluations_without_improvement(harness):
    stopper = EarlyStopCallback(patience=2)
    trainer, _ = scripted_trainer(harness, [0.5, 0.4, 0.45, 0.9, 0.95], [stopper])
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.cur_epoch_idx == 3 and trainer.global_forward_batches == 12


def test_callbacks_need_a_monitor(harness):
    x, y = make_data(8)
    model = harness.make_model(initial_weights())
    with pytest.raises(ValueError, match="EarlyStopCallback needs a monitor"):
        Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1), driver=harness.driver_name,
                progress_bar=None, callbacks=[EarlyStopCallback()])


def test_checkpoint_names_count_epochs_from_1_on_every_schedule(harness, tmp_path):
    by_batches = CheckpointCallback(tmp_path / "batches", every_n_batches=2)
    by_epochs = CheckpointCallback(tmp_path / "epochs", every_n_epochs=1)
    best = CheckpointCallback(tmp_path / "best", topk=-1)
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=2, progress_bar=None,
                      evaluate_dataloaders=harness.make_dataloader(x, y, 16),
                      metrics={"s": ScriptedScore([0.1, 0.2, 0.3, 0.4])}, evaluate_every=2, monitor="score",
                      callbacks=[by_batches, by_epochs, best])
    trainer.run(num_eval_sanity_batch=0)
    assert by_batches.run_folder.name == by_epochs.run_folder.name == best.run_folder.name
    assert sorted(p.name for p in by_batches.run_folder.iterdir()) == [
        "epoch_1-batch_2", "epoch_1-batch_4", "epoch_2-batch_6", "epoch_2-batch_8"]
    assert sorted(p.name for p in by_epochs.run_folder.iterdir()) == ["epoch_1-batch_4", "epoch_2-batch_8"]
    assert sorted(p.name for p in best.run_folder.iterdir()) == [
        "epoch_1-batch_2-score-s_0.1", "epoch_1-batch_4-score-s_0.2",
        "epoch_2-batch_6-score-s_0.3", "epoch_2-batch_8-score-s_0.4"]
