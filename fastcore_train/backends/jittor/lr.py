"""Reading and setting an optimizer's learning rates, one per parameter group.

A jittor parameter group may lack ``"lr"``; its step then uses the optimizer's ``lr``. Setting a
rate writes it into the group, which the step reads first.
Used by framework-neutral callbacks that schedule the learning rate themselves (``WarmupCallback``).
"""
from __future__ import annotations

from typing import Any


def learning_rates(optimizer: Any) -> list[float]:
    """The learning rate of each parameter group."""
    return [float(group.get("lr", optimizer.lr)) for group in optimizer.param_groups]


def set_learning_rates(optimizer: Any, rates: list[float]) -> None:
    """Set each parameter group's learning rate (``rates`` in the order of :func:`learning_rates`)."""
    for group, rate in zip(optimizer.param_groups, rates):
        group["lr"] = rate
