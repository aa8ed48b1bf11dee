"""Reading and setting an optimizer's learning rates, one per parameter group.

OneFlow's ``param_groups`` are ``ParamGroup`` objects whose options read and write like a dict.
Used by framework-neutral callbacks that schedule the learning rate themselves (``WarmupCallback``).
"""
from __future__ import annotations

from typing import Any


def learning_rates(optimizer: Any) -> list[float]:
    """The learning rate of each parameter group."""
    return [float(group["lr"]) for group in optimizer.param_groups]


def set_learning_rates(optimizer: Any, rates: list[float]) -> None:
    """Set each parameter group's learning rate (``rates`` in the order of :func:`learning_rates`)."""
    for group, rate in zip(optimizer.param_groups, rates):
        group["lr"] = rate
