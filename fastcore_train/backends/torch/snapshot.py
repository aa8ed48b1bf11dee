"""Host snapshots of torch state for asynchronous checkpoints (see ``drivers/persistence.py``).

Each storage is copied to CPU memory once and every tensor is rebuilt as the same view of its
copy (offset, size, stride), so views and tied weights stay shared and ``torch.save`` of the
snapshot writes what it writes for the live CPU state, byte for byte (a tensor's python
attributes, which ``torch.save`` records, are kept too). (The live state of a GPU
model is saved with its device recorded; its snapshot says ``cpu``. Loading maps either to the
driver's device.)

The host buffers of one snapshot are kept (:class:`~fastcore_train.drivers.host_buffers.HostBuffers`)
and reused by the next one, so a save copies into memory that is already mapped (pinned, for a
GPU model) instead of allocating and faulting in a fresh copy of the whole state each time.
"""
from __future__ import annotations

from typing import Any, Optional

import copy as copying

import torch

from fastcore_train.drivers.host_buffers import HostBuffers
from fastcore_train.utils.nested import copy_tensors

def _bytes(storage: Any, device: torch.device) -> torch.Tensor:
    """A flat uint8 tensor over ``storage`` (for a fast, vectorised copy)."""
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage)


def host_copy(data: Any, buffers: Optional[HostBuffers] = None) -> Any:
    """``data`` (nested state dicts) with every tensor copied to CPU memory, each storage once,
    into ``buffers`` (the previous snapshot's, by storage address, size and device) where one fits."""
    with (buffers or HostBuffers()).reuse() as round_:
        def copy(live: torch.Tensor) -> torch.Tensor:
            tensor = live.detach()
            storage = tensor.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes(), str(tensor.device))
            host = round_.taken.get(key)  # a storage another tensor of this snapshot shares
            if host is None:
                pinned = tensor.device.type == "cuda"
                host, _ = round_.take(key, lambda: torch.empty(storage.nbytes(), dtype=torch.uint8,
                                                               pin_memory=pinned).untyped_storage())
                _bytes(host, torch.device("cpu")).copy_(_bytes(storage, tensor.device))
            view = torch.empty(0, dtype=tensor.dtype).set_(host, tensor.storage_offset(), tensor.size(),
                                                           tensor.stride())
            if live.__dict__:  # python attributes torch.save records (FSDP's gathered state: _has_been_cloned)
                view.__dict__.update(live.__dict__)
            return view

        return copy_tensors(data, torch.Tensor, copy)


def freeze_buffers(model: torch.nn.Module, state_dict: Any, buffers: HostBuffers) -> Any:
    """A shallow copy of ``state_dict`` (same type and ``_metadata``) whose buffer entries (what
    the forward pass may change, e.g. batch-norm running statistics) are host copies; parameters
    stay live, for a background copy that must end before the next optimizer step."""
    names = [name for name, _ in model.named_buffers() if name in state_dict]
    frozen = copying.copy(state_dict)
    if names:
        copies = host_copy({name: state_dict[name] for name in names}, buffers)
        for name in names:
            frozen[name] = copies[name]
    return frozen
