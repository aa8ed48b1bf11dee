"""Moving nested batches of oneflow tensors and turning tensors into python numbers."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import oneflow as flow


def move_to_device(data: Any, device: Any) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``."""
    if isinstance(data, flow.Tensor):
        return data.to(device)
    if isinstance(data, Mapping):
        moved = {key: move_to_device(value, device) for key, value in data.items()}
        return moved if type(data) is dict else type(data)(moved)
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(move_to_device(value, device) for value in data))
    if isinstance(data, (list, tuple)):
        return type(data)(move_to_device(value, device) for value in data)
    return data


def to_numeric(data: Any) -> Any:
    """Tensors (nested) as python numbers: scalars via ``item()``, others via ``tolist()``."""
    if isinstance(data, flow.Tensor):
        data = data.detach()
        return data.item() if data.numel() == 1 else data.cpu().numpy().tolist()
    if isinstance(data, Mapping):
        return {key: to_numeric(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(to_numeric(value) for value in data))
    if isinstance(data, (list, tuple)):
        return type(data)(to_numeric(value) for value in data)
    return data
