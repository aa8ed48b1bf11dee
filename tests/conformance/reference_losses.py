"""The per-step training losses every backend must reproduce: the harness MLP from
``initial_weights()``, ``make_data(64)``'s inputs labelled by a teacher MLP, shuffled by the Trainer's sampler (seed 0), batches of
8, 200 steps of SGD with momentum or of Adam (eps 1e-10, see ``ADAM_EPS``), no dropout.

``reference_losses.json`` holds torch's trace; regenerate it in the torch env with
``python -m tests.conformance.reference_losses`` (only when the recipe here changes).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastcore_train import Callback, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data, numpy_logits

REFERENCE = Path(__file__).with_name("reference_losses.json")
STEPS = 200
OPTIMIZERS = {"sgd": lambda harness, model: harness.make_sgd(model, 0.05, momentum=0.9),
              "adam": lambda harness, model: harness.make_adam(model, 0.01, eps=ADAM_EPS)}
#: jittor's Adam adds eps before the bias correction (in effect eps / sqrt(1 - beta2 ** step), up to
#: 30x torch's early on): with the default 1e-8 its losses differ from torch's by up to 8.4e-05 here
#: (8.6e-03 on random labels), too close to the tolerance; with an eps too small to matter every
#: framework runs the same Adam.
ADAM_EPS = 1e-10


class LossTrace(Callback):
    """Every training step's loss, as a python float."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_before_backward(self, trainer: Any, outputs: Any) -> None:
        self.losses.append(float(outputs["loss"].item()))


def loss_trace(harness: Any, optimizer: str) -> list[float]:
    """The recipe's per-step losses on ``harness``'s backend."""
    x, _ = make_data(64)
    y = numpy_logits(initial_weights(seed=11), x).argmax(-1)  # a teacher's labels: learnable, so training is smooth
    model = harness.make_model(initial_weights())
    trace = LossTrace()
    Trainer(model=model, driver=harness.driver_name, device="cpu", optimizers=OPTIMIZERS[optimizer](harness, model),
            train_dataloader=harness.make_dataloader(x, y, 8, shuffle=True), n_batches=STEPS, progress_bar=None,
            model_summary=False, callbacks=[trace]).run(num_eval_sanity_batch=0)
    return trace.losses


if __name__ == "__main__":
    from tests.conformance.harnesses.torch import Harness
    import torch
    traces = {name: loss_trace(Harness(), name) for name in OPTIMIZERS}
    REFERENCE.write_text(json.dumps({"framework": f"torch {torch.__version__}", **traces}, indent=1) + "\n")
