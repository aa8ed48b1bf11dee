"""Turning jittor Vars (nested in batches and outputs) into python numbers."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jittor as jt


def to_numeric(data: Any) -> Any:
    """Vars (nested) as python numbers: one element via ``item()``, others via ``tolist()``."""
    if isinstance(data, jt.Var):
        return data.item() if data.numel() == 1 else data.numpy().tolist()
    if isinstance(data, Mapping):
        return {key: to_numeric(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(to_numeric(value) for value in data))
    if isinstance(data, (list, tuple)):
        return type(data)(to_numeric(value) for value in data)
    return data
