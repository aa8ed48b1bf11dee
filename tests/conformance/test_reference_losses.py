"""Driver conformance across frameworks: the same recipe (model, initial weights, data, sampler
seed, optimizer) gives torch's per-step losses within 1e-4 on every backend, for SGD with momentum
and for Adam (see ``reference_losses.py``). The largest difference is printed (``-s``)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conformance.reference_losses import REFERENCE, STEPS, loss_trace

TOLERANCE = 1e-4


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_losses_match_the_torch_reference(harness, backend_name, optimizer):
    reference = json.loads(REFERENCE.read_text())[optimizer]
    losses = loss_trace(harness, optimizer)
    assert len(losses) == len(reference) == STEPS
    difference = np.abs(np.array(losses) - np.array(reference))
    print(f"\n{backend_name} vs {json.loads(REFERENCE.read_text())['framework']}, {optimizer}: largest per-step "
          f"loss difference {difference.max():.3e} (loss {reference[0]:.3f} -> {reference[-1]:.3f})")
    assert np.mean(reference[-20:]) < 0.6 * np.mean(reference[:20])  # it learns: idle runs would match trivially
    assert difference.max() < TOLERANCE, f"step {difference.argmax()}: {losses[difference.argmax()]} vs " \
                                         f"{reference[difference.argmax()]}"
