"""Checking the first training loss before its backward: one number, with a gradient.

A loss of several numbers (per sample, or the logits themselves) is refused by torch and oneflow
with a message about "implicitly created" gradients, and silently summed by paddle and jittor; a
loss without a gradient (computed under ``no_grad`` or evaluation mode, detached, from frozen
parameters) is a raw autograd error in torch and trains nothing, silently, in paddle and jittor.
Both are said here, once, in the words of the user's code, on the first batch only.

The shape is read by duck typing (every framework's tensors have ``shape``); whether a value is a
tensor of the framework and needs a gradient is asked of the backend's ``tensors`` module
(``requires_grad(value) -> Optional[bool]``, None for a value that is not its tensor). A backend
without that function (a third party's) gets the shape check only.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

from fastcore_train.drivers.registry import all_backends, find_backend_part

TENSORS_PART = "tensors"


def grad_probe(backend: str) -> Optional[Callable[[Any], Optional[bool]]]:
    """The ``requires_grad`` function of backend ``backend``'s ``tensors`` module, or None."""
    entry = next((entry for entry in all_backends() if entry.name == backend), None)
    if entry is None:
        return None
    module = find_backend_part(entry, TENSORS_PART)
    if module is None:
        return None
    probe = getattr(module, "requires_grad", None)
    return probe if callable(probe) else None


def _element_count(loss: Any) -> Optional[int]:
    shape = getattr(loss, "shape", None)
    if shape is None or isinstance(shape, (str, bytes)):
        return None
    try:
        return math.prod(int(size) for size in shape)
    except (TypeError, ValueError):  # not a shape as frameworks write them: do not judge
        return None


def check_loss(loss: Any, backend: str) -> None:
    """Raise a TypeError or ValueError saying what to change when ``loss`` cannot be trained on."""
    probe = grad_probe(backend)
    needs_grad = probe(loss) if probe is not None else True
    if needs_grad is None:
        raise TypeError(
            f"The training loss is a {type(loss).__name__}, not a tensor of the model's framework "
            f"({backend}), so it has no gradient to train with. Return the loss tensor itself from "
            "train_step/forward (computed with the framework's operations from the model's outputs), "
            "not a number made of it with .item(), float() or numpy.")
    count = _element_count(loss)
    if count is not None and count != 1:
        shape = [int(size) for size in loss.shape]
        raise ValueError(
            f"The training loss has shape {shape} ({count} numbers), but backward needs a single number. "
            "Reduce it in train_step/forward (or in output_mapping), e.g. loss.mean() or loss.sum(); a "
            "loss function called with reduction='none' returns one value per sample.")
    if not needs_grad:
        raise ValueError(
            "The training loss has no gradient (requires_grad is False, or stop_gradient is True), so "
            "backward would train nothing. It was computed without gradients: inside no_grad() or "
            "evaluate_context(), from a detached tensor, or from parameters that are all frozen. Compute "
            "it in the training step with gradients enabled, from parameters the optimizer trains.")
