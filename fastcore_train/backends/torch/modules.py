"""Walking a torch model's module tree for the model summary (:func:`fastcore_train.summarize`).

torch parameters answer ``numel()``, ``requires_grad`` and ``element_size()``, so the core's
reading serves, with one change: under DeepSpeed ZeRO-3 a parameter is an empty placeholder
whose real size is its ``ds_numel``, and that is what is counted (the model's size, not this
rank's share of it). Children come from the core's default ``named_children()``.
"""
from __future__ import annotations

from typing import Any

from fastcore_train.summary import torch_style_parameter_facts

__all__ = ["parameter_facts"]


def _full_numel(parameter: Any) -> int:
    return int(getattr(parameter, "ds_numel", parameter.numel()))


def parameter_facts(module: Any) -> list[tuple[int, int, bool, int]]:
    """``(identity, values, trainable, bytes)`` per parameter of a torch module."""
    return torch_style_parameter_facts(module, numel=_full_numel)
