"""Moving nested batches of oneflow tensors and turning tensors into python numbers.

Only the oneflow calls for one tensor are here; :func:`fastcore_train.utils.nested.map_tensors`
walks the dicts, lists and tuples around them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import oneflow as flow

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.tensor_reader import TensorReader


def move_to_device(data: Any, device: Any) -> Any:
    """``data`` with every tensor inside (dicts, lists, tuples, nested) moved to ``device``, and
    every numeric numpy array made a tensor there (``flow.from_numpy``)."""
    return map_tensors_and_arrays(data, flow.Tensor, lambda array: flow.from_numpy(array).to(device),
                                  lambda tensor: tensor.to(device))


def _tensor_to_numeric(tensor: flow.Tensor) -> Any:
    tensor = tensor.detach()
    return tensor.item() if tensor.numel() == 1 else tensor.cpu().numpy().tolist()


def _after_queued_work(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``read`` after a sleeping wait for the work oneflow's VM has queued so far.

    A read (``item()``, ``numpy()``) waits behind every queued instruction, and oneflow 0.9 spends
    that wait spinning on the calling thread (``BlockingThenBusy``: a spin counter after the
    blocking one). The VM's scheduler spins too while work is queued, so the read's spin took a
    core from the worker thread computing the queue: Trainer epochs that ended with a read ran up to
    1.5x a hand loop's time on 2 cores (bench/models.py). ``eager.Sync()`` waits on a condition
    variable with the GIL released; the read that follows finds nothing queued.
    """
    def read_settled(data: Any) -> Any:
        flow._oneflow_internal.eager.Sync()
        return read(data)
    return read_settled


_READER = TensorReader(flow.Tensor, to_number=_tensor_to_numeric)
to_numeric = _after_queued_work(_READER.to_numeric)
to_numpy = _after_queued_work(_READER.to_numpy)
requires_grad = _READER.requires_grad
