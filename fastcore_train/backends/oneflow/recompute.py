"""Activation checkpointing's framework call for oneflow (the rest is in the core:
:mod:`fastcore_train.drivers.activation_checkpointing`).

``oneflow.utils.checkpoint.checkpoint`` (oneflow 0.9: saved-tensor hooks, positional arguments
only, so keyword arguments are bound first). It does not restore the random state for the
recompute (its own docstring says so), and oneflow's generator states cannot be restored either
(see :mod:`fastcore_train.backends.oneflow.rng`): a dropout inside a recomputed layer would draw
another mask in backward than in forward, and the gradients would be wrong. So a layer holding a
module that draws random numbers (``nn.Dropout`` with ``p > 0``) is refused.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import oneflow.utils.checkpoint

from fastcore_train.backends.oneflow.rng import drawing_modules


def recompute(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` keeping only its inputs; its activations are recomputed in backward."""
    return oneflow.utils.checkpoint.checkpoint(functools.partial(function, **kwargs) if kwargs else function, *args)


def refuse(name: str, layer: Any) -> Optional[str]:
    """Why ``layer`` cannot be recomputed exactly here (it draws random numbers), or None."""
    drawing = drawing_modules(layer)
    if not drawing:
        return None
    return (f"it holds {', '.join(repr(n) for n in drawing)}, which draw random numbers (dropout), and oneflow 0.9's "
            "checkpoint cannot replay them in the recompute, so its gradients would not match its forward. Select "
            "layers without dropout (or set its p=0 while training with activation checkpointing).")
