"""Reading and setting an optimizer's learning rates, one per parameter group (torch's ``param_groups``).

Used by framework-neutral callbacks that schedule the learning rate themselves (``WarmupCallback``).
FairScale's OSS and DeepSpeed's engine step through the user's optimizer's ``param_groups``, so
setting them here reaches every torch driver.
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
