"""Host snapshots of torch state for asynchronous checkpoints (see ``drivers/persistence.py``).

Each storage is copied to CPU memory once and every tensor is rebuilt as the same view of its
copy (offset, size, stride), so views and tied weights stay shared and ``torch.save`` of the
snapshot writes what it writes for the live CPU state, byte for byte. (The live state of a GPU
model is saved with its device recorded; its snapshot says ``cpu``. Loading maps either to the
driver's device.)
"""
from __future__ import annotations

from typing import Any

import torch

from fastcore_train.utils.nested import copy_tensors


def host_copy(data: Any) -> Any:
    """``data`` (nested state dicts) with every tensor copied to CPU memory."""
    storages: dict[tuple[int, str], Any] = {}

    def copy(tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        storage = tensor.untyped_storage()
        key = (storage.data_ptr(), str(tensor.device))
        host = storages.get(key)
        if host is None:
            host = storages[key] = storage.clone() if tensor.device.type == "cpu" else storage.cpu()
        return torch.empty(0, dtype=tensor.dtype).set_(host, tensor.storage_offset(), tensor.size(),
                                                        tensor.stride())

    return copy_tensors(data, torch.Tensor, copy)
