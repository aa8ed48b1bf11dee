"""Walking a oneflow model's module tree for the model summary (:func:`fastcore_train.summarize`).

Only the framework calls are here: a module's named children and each parameter's identity, size,
whether it trains and its bytes; the table is built in the core.
"""
from __future__ import annotations

from typing import Any


def named_children(module: Any) -> list[tuple[str, Any]]:
    """The module's direct submodules, with their attribute names, in definition order."""
    return list(module.named_children())


def parameter_facts(module: Any) -> list[tuple[int, int, bool, int]]:
    """``(identity, number of values, trainable, bytes)`` of each parameter under ``module``."""
    return [(id(p), p.numel(), bool(p.requires_grad), p.numel() * p.element_size()) for p in module.parameters()]
