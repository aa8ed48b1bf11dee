"""Walking a jittor model's module tree for the model summary (:func:`fastcore_train.summarize`).

Only the framework calls are here: each parameter's identity, size, whether it trains and its
bytes; children come from the core's default ``named_children()`` and the table is built there.
"""
from __future__ import annotations

from typing import Any


def parameter_facts(module: Any) -> list[tuple[int, int, bool, int]]:
    """``(identity, number of values, trainable, bytes)`` of each parameter under ``module``."""
    return [(id(p), int(p.numel()), bool(p.requires_grad), int(p.nbytes)) for p in module.parameters()]
