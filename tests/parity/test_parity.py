"""One recipe on torch and on paddle: the same MLP and CNN, initial weights moved by the
converter, the same sampler seed, no dropout. Per-step losses agree within 1e-4 over 200 steps
for SGD with momentum and for Adam, final accuracies within one sample, and 100 steps on torch
converted and continued for 100 on paddle (and the reverse) match 200 steps on one framework.

Run by the ``parity`` tox env (torch and paddle side by side): ``pytest tests/parity --parity``.
The largest differences are printed (``-s``) for the record.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fastcore_train import Callback, Trainer, convert_checkpoint, load_neutral_weights, save_neutral_weights
from fastcore_train.data import load_digits
from tests.parity.frameworks import FRAMEWORKS

STEPS, HALF, TOLERANCE = 200, 100, 1e-4


@pytest.fixture(scope="module")
def digits() -> dict[str, np.ndarray]:
    data = load_digits()
    return {name: getattr(data, name) for name in ("x_train", "y_train", "x_test", "y_test")}


def _trainer(framework: str, model: Any, optimizer: str, digits: dict[str, np.ndarray], n_batches: int,
             callbacks: list[Callback]) -> Trainer:
    spec = FRAMEWORKS[framework]
    return Trainer(model=model, driver=framework, device="cpu", optimizers=spec[optimizer](model),
                   train_dataloader=spec["loader"](digits["x_train"], digits["y_train"], True),
                   n_batches=n_batches, progress_bar=None, model_summary=False, callbacks=callbacks)


class LossTrace(Callback):
    """Every training step's loss, as a python float."""

    def __init__(self, losses: list[float]) -> None:
        self.losses = losses

    def on_before_backward(self, trainer: Any, outputs: Any) -> None:
        self.losses.append(float(outputs["loss"].item()))


def _accuracy(framework: str, model: Any, digits: dict[str, np.ndarray]) -> int:
    import paddle
    import torch
    model.eval()
    if framework == "torch":
        with torch.no_grad():
            logits = model(torch.from_numpy(digits["x_test"])).numpy()
    else:
        with paddle.no_grad():
            logits = model(paddle.to_tensor(digits["x_test"])).numpy()
    return int((logits.argmax(-1) == digits["y_test"]).sum())


def _same_start(kind: str, tmp_path: Path) -> dict[str, Any]:
    """A torch model and a paddle model holding the same initial weights (moved by the converter)."""
    FRAMEWORKS["torch"]["seed"](0)
    models = {name: spec["models"][kind]() for name, spec in FRAMEWORKS.items()}
    save_neutral_weights(models["torch"], tmp_path / "init.safetensors")
    load_neutral_weights(models["paddle"], tmp_path / "init.safetensors")
    return models


class SaveAt(Callback):
    """Save a checkpoint after the given global batch, as CheckpointCallback(every_n_batches=...) would."""

    def __init__(self, batch: int, folder: Path) -> None:
        self.batch, self.folder = batch, folder

    def on_train_batch_end(self, trainer: Any) -> None:
        if trainer.global_forward_batches == self.batch:
            trainer.save_checkpoint(self.folder)


def _run(framework: str, model: Any, optimizer: str, digits: dict[str, np.ndarray], n_batches: int,
         resume_from: Any = None, save_at: Any = None) -> list[float]:
    losses: list[float] = []
    callbacks = [LossTrace(losses)] + ([SaveAt(*save_at)] if save_at is not None else [])
    _trainer(framework, model, optimizer, digits, n_batches, callbacks).run(resume_from=resume_from)
    return losses


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_same_losses_and_accuracy(kind: str, optimizer: str, digits: dict[str, np.ndarray], tmp_path: Path) -> None:
    models = _same_start(kind, tmp_path)
    losses = {name: _run(name, model, optimizer, digits, STEPS) for name, model in models.items()}
    assert len(losses["torch"]) == len(losses["paddle"]) == STEPS
    difference = np.abs(np.array(losses["torch"]) - np.array(losses["paddle"]))
    print(f"\nparity torch-paddle {kind} {optimizer}: largest per-step loss difference {difference.max():.3e} "
          f"(loss {losses['torch'][0]:.3f} -> {losses['torch'][-1]:.3f})")
    assert difference.max() < TOLERANCE, f"step {difference.argmax()}: {difference.max()}"
    assert losses["torch"][-1] < 0.7 * losses["torch"][0]  # it learned: the comparison is not of two idle runs
    accuracy = {name: _accuracy(name, model, digits) for name, model in models.items()}
    assert abs(accuracy["torch"] - accuracy["paddle"]) <= 1, accuracy


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("first,second", [("torch", "paddle"), ("paddle", "torch")])
def test_continue_on_the_other_framework(first: str, second: str, optimizer: str, digits: dict[str, np.ndarray],
                                         tmp_path: Path) -> None:
    models = _same_start("mlp", tmp_path)
    whole = _run(first, models[first], optimizer, digits, STEPS, save_at=(HALF, tmp_path / "half"))
    convert_checkpoint(tmp_path / "half", tmp_path / "converted", to=second)
    FRAMEWORKS["torch"]["seed"](1)
    fresh = FRAMEWORKS[second]["models"]["mlp"]()  # its own random weights: the checkpoint replaces them
    tail = _run(second, fresh, optimizer, digits, STEPS, resume_from=tmp_path / "converted")
    assert len(whole) == STEPS and len(tail) == STEPS - HALF
    difference = np.abs(np.array(tail) - np.array(whole[HALF:]))
    print(f"\n{first} {HALF} steps -> convert -> {second} {STEPS - HALF} steps vs {STEPS} on {first}, {optimizer}: "
          f"largest per-step loss difference {difference.max():.3e}")
    assert difference.max() < TOLERANCE, f"step {HALF + difference.argmax()}: {difference.max()}"
