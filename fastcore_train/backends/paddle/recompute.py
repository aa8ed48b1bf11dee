"""Activation checkpointing's framework call for paddle (the rest is in the core:
:mod:`fastcore_train.drivers.activation_checkpointing`).

``paddle.distributed.fleet.utils.recompute`` with ``use_reentrant=False`` (its hook-based
implementation: it takes keyword arguments, and gradients reach the parameters through the normal
autograd path, so Fleet's data-parallel gradient synchronisation sees them). It restores the
random state for the recompute (``preserve_rng_state``, on by default), so dropout draws the same mask.

Paddle warns on every call whose tensor inputs all have ``stop_gradient`` (the first layer, given
the batch) that recomputing it is needless; for this implementation it is not (the layer's own
parameters still need its activations), so that one message is filtered out of paddle's log.
"""
from __future__ import annotations

import importlib
import logging
from typing import Any, Callable

from paddle.distributed.fleet.utils import recompute as fleet_recompute

_NEEDLESS = "[Recompute]: None of the inputs to current recompute block need grad"


def _not_the_needless_warning(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(_NEEDLESS)


# the module, not the function of the same name that its package exports
_PADDLE_LOG = importlib.import_module("paddle.distributed.fleet.recompute.recompute").logger
if _not_the_needless_warning not in _PADDLE_LOG.filters:
    _PADDLE_LOG.addFilter(_not_the_needless_warning)


def recompute(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` keeping only its inputs; its activations are recomputed in backward."""
    return fleet_recompute(function, *args, use_reentrant=False, **kwargs)
