"""A training step that runs out of memory is re-raised naming the batch, its shapes and what to
change, chained to the allocator's own error. Real allocation failures, made cheaply: a request for
petabytes fails at once without touching memory. Runs on every backend (``--backend``)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from fastcore_train import Trainer
from fastcore_train.controllers.memory import BatchOutOfMemoryError
from fastcore_train.controllers.trainer import default_batch_step
from tests.conformance.harnesses.base import initial_weights, make_data

HUGE = 1 << 50  # elements: 4-8 PiB, refused by the allocator immediately


def numpy_allocation():
    np.empty(HUGE)  # numpy's MemoryError, as a collate or preprocessing step in train_step would give


def framework_allocation(backend):
    """The framework's own allocator failing (torch: RuntimeError, paddle: MemoryError); checked on those two."""
    if backend not in ("torch", "paddle"):
        pytest.skip(f"the {backend} allocator's failure on a huge request is not checked here")
    framework = importlib.import_module(backend)
    return lambda: framework.empty([HUGE])


@pytest.mark.parametrize("source", ["numpy", "framework"])
def test_an_allocation_failure_names_the_batch_and_the_fix(harness, backend_name, source):
    allocate = numpy_allocation if source == "numpy" else framework_allocation(backend_name)

    def step(trainer, batch):
        if trainer.global_forward_batches == 5:  # epoch 2, its 2nd batch
            allocate()
        default_batch_step(trainer, batch)

    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=2, progress_bar=None, batch_step_fn=step)
    with pytest.raises(BatchOutOfMemoryError, match=r"Out of memory in the training step of epoch 2, batch 2 of the "
                                                    r"epoch \(batch 6 overall\); the batch holds x: \[4, 6\], "
                                                    r"y: \[4\]\. .*smaller batch_size .*accumulation_steps=k") as caught:
        trainer.run(num_eval_sanity_batch=0)
    assert isinstance(caught.value, MemoryError) and caught.value.__cause__ is not None
    assert trainer.global_forward_batches == 5


def test_other_runtime_errors_pass_unchanged(harness):
    def step(trainer, batch):
        raise RuntimeError("a shape mismatch")

    x, y = make_data(8)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=1, progress_bar=None, batch_step_fn=step)
    with pytest.raises(RuntimeError, match="^a shape mismatch$"):
        trainer.run(num_eval_sanity_batch=0)


class Rows:
    """16 samples ``{"x", "y"}`` of numpy arrays."""

    def __init__(self) -> None:
        self.x, self.y = make_data(16)

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> dict:
        return {"x": self.x[int(index)], "y": self.y[int(index)]}


def test_out_of_memory_in_a_collate_fn_names_it_and_the_batch(harness, backend_name):
    """The same for the user's collate_fn (numpy's MemoryError while padding, as a fixed-length pad
    of a huge size would give): a BatchOutOfMemoryError naming the batch and the function."""
    made = []

    def pad_to_fixed_length(samples):
        made.append(len(samples))
        if len(made) == 6:  # epoch 2, its 2nd batch
            np.zeros(HUGE, dtype=np.float32)
        return {"x": np.stack([s["x"] for s in samples]), "y": np.stack([s["y"] for s in samples])}

    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.loader_over(Rows(), 4, collate_fn=pad_to_fixed_length),
                      harness.make_sgd(model, 0.1), driver=harness.driver_name, n_epochs=2, progress_bar=None)
    with pytest.raises(BatchOutOfMemoryError, match=r"Out of memory while the dataloader made batch 2 of epoch 2 "
                                                    r"\(batch 6 overall\), in its collate_fn or the dataset's "
                                                    r"__getitem__ \(in pad_to_fixed_length, test_out_of_memory.py "
                                                    r"line \d+\), before the training step\. .*batch_size") as caught:
        trainer.run(num_eval_sanity_batch=0)
    assert isinstance(caught.value.__cause__, MemoryError)
    assert trainer.global_forward_batches == 5
