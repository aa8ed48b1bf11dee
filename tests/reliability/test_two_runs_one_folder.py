"""Two runs started with ``run(resume_from="auto")`` on one ``CheckpointCallback`` folder resume the
same checkpoint and would write the same names into one run folder: the second is refused before it
trains, naming the holder of the run folder's lock, and the first run's checkpoints stay its own.
The lock is a ``flock`` held per open file, so a second Trainer in this process is refused as a second
process is. Runs on every backend (``--backend``)."""
from __future__ import annotations

import json

from fastcore_train import Callback, CheckpointCallback, Trainer
from fastcore_train.checkpoint.run_lock import RunFolderBusyError
from tests.conformance.harnesses.base import initial_weights, make_data


def trainer(harness, folder, n_epochs, callbacks=()):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    saver = CheckpointCallback(folder, last=True, save_object="checkpoint", on_exceptions=Exception)
    return Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1), driver=harness.driver_name,
                   n_epochs=n_epochs, progress_bar=None, callbacks=[saver, *callbacks]), saver


class StartSecondRun(Callback):
    """While the first run trains (after its first batch), the second one is started on the same folder."""

    def __init__(self, harness, folder):
        self.harness, self.folder, self.error, self.second = harness, folder, None, None

    def on_train_batch_end(self, trainer):
        if self.second is None:
            self.second, _ = trainer_for(self.harness, self.folder)
            try:
                self.second.run(num_eval_sanity_batch=0, resume_from="auto")
            except RunFolderBusyError as error:
                self.error = error


def trainer_for(harness, folder):
    return trainer(harness, folder, n_epochs=3)


def test_a_second_run_resuming_the_same_checkpoint_is_refused_before_it_trains(harness, tmp_path):
    first_run, saver = trainer(harness, tmp_path, n_epochs=1)
    first_run.run(num_eval_sanity_batch=0)  # leaves <run>/last after 4 batches
    run_folder = saver.run_folder
    starter = StartSecondRun(harness, tmp_path)
    resumed, resumed_saver = trainer(harness, tmp_path, n_epochs=3, callbacks=[starter])
    resumed.run(num_eval_sanity_batch=0, resume_from="auto")
    assert resumed_saver.run_folder == run_folder and resumed.global_forward_batches == 12
    assert starter.error is not None, "the second run was not refused"
    message = str(starter.error)
    assert str(run_folder) in message and "run.fastcore-lock" in message and "before training" in message, message
    assert starter.second.global_forward_batches == 4  # resumed, then refused: no batch trained
    assert sorted(p.name for p in run_folder.iterdir()) == ["last"]  # no exception checkpoint of the second
    state = json.loads((run_folder / "last" / "trainer_state.json").read_text())["state"]
    assert state["global_forward_batches"] == 12  # the first run's final checkpoint, its own
    again, _ = trainer(harness, tmp_path, n_epochs=4)
    again.run(num_eval_sanity_batch=0, resume_from="auto")  # once the first has ended, the folder is free
    assert again.global_forward_batches == 16
