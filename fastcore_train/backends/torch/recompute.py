"""Activation checkpointing's framework call for torch (the rest is in the core:
:mod:`fastcore_train.drivers.activation_checkpointing`).

``torch.utils.checkpoint.checkpoint`` with ``use_reentrant=False``: it takes keyword arguments,
works when no input requires a gradient, restores the random state for the recompute (dropout
draws the same mask) and works inside DistributedDataParallel. torch's own
``apply_activation_checkpointing`` is not used: its wrapper module renames every parameter under it
(``_checkpoint_wrapped_module.``), which the core avoids by keeping the module tree as it is.
"""
from __future__ import annotations

from typing import Any, Callable

import torch.utils.checkpoint


def recompute(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` keeping only its inputs; its activations are recomputed in backward."""
    return torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=False, **kwargs)
