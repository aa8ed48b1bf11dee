"""Building Trainers for the conformance tests with the backend's harness."""
from __future__ import annotations

from typing import Any

import numpy as np

from pathlib import Path

from fastcore_train import Callback, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data


def batches_of(x: np.ndarray, y: np.ndarray, batch_size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(x), batch_size)]


def make_trainer(harness: Any, model: Any, x: np.ndarray, y: np.ndarray, batch_size: int = 8,
                 lr: float = 0.1, **kwargs: Any) -> Trainer:
    kwargs.setdefault("progress_bar", None)
    kwargs.setdefault("n_epochs", 1)
    optimizer = kwargs.pop("optimizers", None) or harness.make_sgd(model, lr)
    return Trainer(model=model, train_dataloader=harness.make_dataloader(x, y, batch_size),
                   optimizers=optimizer, driver=harness.driver_name, device="cpu", **kwargs)


def assert_weights_equal(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=f"weight {name} differs")


def assert_weights_close(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray], rtol: float = 1e-5,
                         atol: float = 1e-6) -> None:
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=atol, err_msg=f"weight {name} differs")


class StopRun(Exception):
    """Raised by a test callback to end a run abruptly, like a crash would."""


class SaveAndStop(Callback):
    """Write a checkpoint after global batch ``at`` and end the run."""

    def __init__(self, at: int, folder: Path) -> None:
        self.at, self.folder = at, folder

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            trainer.save_checkpoint(self.folder)
            raise StopRun(self.at)


def resumed_and_uninterrupted(harness: Any, tmp_path: Any, make_optimizer: Any,
                              between: Any = None) -> tuple[Any, Any, Any]:
    """Train 3 epochs uninterrupted, and 1 epoch, a checkpoint, then a resume to 3 epochs from it
    (``between(folder)`` may replace the checkpoint folder first, returning the one to resume).
    Returns ``(resumed trainer, resumed model, uninterrupted model)``."""
    x, y = make_data(32)

    def trainer_for(model: Any, n_epochs: int) -> Trainer:
        return make_trainer(harness, model, x, y, n_epochs=n_epochs, optimizers=make_optimizer(model))

    uninterrupted = harness.make_model(initial_weights())
    trainer_for(uninterrupted, 3).run(num_eval_sanity_batch=0)
    first = harness.make_model(initial_weights())
    trainer = trainer_for(first, 1)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    folder = tmp_path / "ckpt" if between is None else between(tmp_path / "ckpt")

    resumed = harness.make_model(initial_weights(seed=3))
    trainer = trainer_for(resumed, 3)
    trainer.run(num_eval_sanity_batch=0, resume_from=folder)
    return trainer, resumed, uninterrupted
