"""Host snapshots of oneflow state for asynchronous checkpoints (see ``drivers/persistence.py``).

Every tensor is copied to CPU memory; ``flow.save`` of the snapshot writes the same folder as of
the live CPU state.
"""
from __future__ import annotations

from typing import Any

import oneflow as flow

from fastcore_train.utils.nested import copy_tensors


def host_copy(data: Any) -> Any:
    """``data`` (nested state dicts) with every tensor copied to CPU memory."""

    def copy(tensor: flow.Tensor) -> flow.Tensor:
        tensor = tensor.detach()
        return tensor.clone() if tensor.device.type == "cpu" else tensor.to("cpu")

    return copy_tensors(data, flow.Tensor, copy)
