"""Reading how a torch DataLoader samples, rebuilding it around another batch sampler, and the
driver's data layer (:class:`TorchData`).

The logic is :class:`fastcore_train.samplers.dataloader_adapter.DataLoaderAdapter`, shared with
paddle and oneflow; this module names torch's classes for it.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

from fastcore_train.backends.torch import tensors as torch_tensors
from fastcore_train.drivers.data import DataAdapter, PendingRead
from fastcore_train.samplers.dataloader_adapter import DataLoaderAdapter

_ADAPTER = DataLoaderAdapter(
    dataloader=DataLoader, iterable_dataset=IterableDataset, batch_sampler=BatchSampler,
    random_sampler=RandomSampler, sequential_sampler=SequentialSampler,
    dataloader_path="torch.utils.data.DataLoader",
    sampling=frozenset({"batch_size", "shuffle", "sampler", "batch_sampler", "drop_last"}),
    worker_only=("prefetch_factor",))

get_dataloader_args = _ADAPTER.get_dataloader_args
replace_batch_sampler = _ADAPTER.replace_batch_sampler
dataloader_from_dataset = _ADAPTER.from_dataset


class TorchData(DataAdapter):
    """``driver.data`` for torch: DataLoaders read and rebuilt by the shared adapter, batches moved
    with ``Tensor.to(device, non_blocking=...)``."""

    example = "a torch.utils.data.DataLoader"
    dataloader_args = staticmethod(get_dataloader_args)
    replace_batch_sampler = staticmethod(replace_batch_sampler)
    tensors = torch_tensors

    def __init__(self, device: torch.device, non_blocking: bool = True) -> None:
        super().__init__(device, needs_move=device.type != "cpu")
        self.non_blocking = non_blocking

    def move(self, batch: Any) -> Any:
        return torch_tensors.move_to_device(batch, self.device, self.non_blocking)

    def start_read(self, value: Any) -> PendingRead:
        """On CUDA the copy to the host starts now, behind the work queued so far, and an event
        marks it: the read then waits for that copy only, not for the work queued after it."""
        if isinstance(value, torch.Tensor) and value.is_cuda:
            host = value.detach().to("cpu", non_blocking=True)
            copied = torch.cuda.Event()
            copied.record()

            def read(tensor: torch.Tensor) -> Any:
                copied.synchronize()
                return self.to_numeric(tensor)

            return PendingRead(read, host)
        return super().start_read(value)
