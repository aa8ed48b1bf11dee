"""Reading and setting a paddle optimizer's learning rate.

Paddle has one learning rate per optimizer (a parameter group's ``learning_rate`` is a factor
applied to it), read with ``get_lr()`` and set with ``set_lr()``; an optimizer driven by a paddle
``LRScheduler`` cannot have its rate set, which is an error saying so.
Used by framework-neutral callbacks that schedule the learning rate themselves (``WarmupCallback``).
"""
from __future__ import annotations

from typing import Any

from paddle.optimizer.lr import LRScheduler


def learning_rates(optimizer: Any) -> list[float]:
    """The optimizer's learning rate, as a one-element list."""
    return [float(optimizer.get_lr())]


def set_learning_rates(optimizer: Any, rates: list[float]) -> None:
    """Set the optimizer's learning rate to ``rates[0]``."""
    if isinstance(getattr(optimizer, "_learning_rate", None), LRScheduler):
        raise ValueError("This paddle optimizer's learning rate comes from a paddle LRScheduler, so it cannot be "
                         "set by a callback: build the optimizer with a float learning_rate to schedule it here, "
                         "or schedule with the LRScheduler alone (LRSchedCallback).")
    optimizer.set_lr(rates[0])
