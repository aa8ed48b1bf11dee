"""Moving nested batches of paddle tensors and turning tensors into python numbers."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import paddle


def move_to_device(data: Any, device: str) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``."""
    if isinstance(data, paddle.Tensor):
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
    """Tensors (nested) as python numbers: one element via ``item()``, others via ``tolist()``."""
    if isinstance(data, paddle.Tensor):
        data = data.detach()
        return data.item() if int(data.size) == 1 else data.tolist()
    if isinstance(data, Mapping):
        return {key: to_numeric(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(to_numeric(value) for value in data))
    if isinstance(data, (list, tuple)):
        return type(data)(to_numeric(value) for value in data)
    return data
