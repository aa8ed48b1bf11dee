"""An ``on_exception`` listener that fails does not replace the run's own error: ``run()`` raises the
original, the listener's failure is logged naming it and noted on the error, and every other listener
(the progress bar's closing among them) still runs. Runs on every backend (``--backend``)."""
from __future__ import annotations

import sys

import pytest

from fastcore_train import Callback, Trainer
from fastcore_train.controllers.progress import RichProgress
from fastcore_train.controllers.trainer import default_batch_step
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.reliability.conftest import messages


class BrokenHandler(Callback):
    def on_exception(self, trainer, exception):
        raise KeyError("the handler's own bug")


def failing_step(trainer, batch):
    if trainer.global_forward_batches == 2:
        raise RuntimeError("the run's real error")
    default_batch_step(trainer, batch)


def test_the_original_error_is_raised_and_the_progress_bar_is_closed(harness, log_records):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    progress = RichProgress()
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=1, batch_step_fn=failing_step,
                      callbacks=[BrokenHandler(), progress])
    with pytest.raises(RuntimeError, match="the run's real error") as caught:
        trainer.run(num_eval_sanity_batch=0)
    assert progress._progress is None  # stopped: the terminal is not left with a live bar
    logged = [line for line in messages(log_records, level=40) if "on_exception listener" in line]
    assert logged == ["The on_exception listener BrokenHandler.on_exception failed while handling RuntimeError: "
                      "KeyError: \"the handler's own bug\""]
    if sys.version_info >= (3, 11):
        assert caught.value.__notes__ == logged
