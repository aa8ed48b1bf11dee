"""Host snapshots of paddle state for asynchronous checkpoints (see ``drivers/persistence.py``).

Every tensor is copied to CPU memory and keeps its name: ``paddle.save`` pickles a tensor as its
name and its values, so the snapshot's file equals the live state's byte for byte.
"""
from __future__ import annotations

from typing import Any

import paddle

from fastcore_train.utils.nested import copy_tensors


def host_copy(data: Any) -> Any:
    """``data`` (nested state dicts) with every tensor copied to CPU memory, names kept."""

    def copy(tensor: paddle.Tensor) -> paddle.Tensor:
        with paddle.no_grad():
            host = tensor.detach().clone() if tensor.place.is_cpu_place() else tensor.detach().cpu()
        host.name = tensor.name
        return host

    return copy_tensors(data, paddle.Tensor, copy)
