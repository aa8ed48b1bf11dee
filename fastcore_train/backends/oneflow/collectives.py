"""Python objects across oneflow ranks: pickled into uint8 tensors and gathered with ``flow.comm``.

Used by the DDP driver and by metrics gathering over oneflow's own ranks (no driver).
"""
from __future__ import annotations

import pickle
from typing import Any

import oneflow as flow


def all_gather_object(obj: Any, device: Any, world_size: int) -> list[Any]:
    """Every rank's ``obj``, in rank order; the bytes travel as tensors on ``device``."""
    payload = flow.tensor(list(pickle.dumps(obj)), dtype=flow.uint8, device=device)
    size = flow.tensor([payload.numel()], dtype=flow.int64, device=device)
    sizes = [flow.zeros(1, dtype=flow.int64, device=device) for _ in range(world_size)]
    flow.comm.all_gather(sizes, size)
    longest = max(int(s.item()) for s in sizes)
    padded = flow.zeros(longest, dtype=flow.uint8, device=device)
    padded[:payload.numel()] = payload
    gathered = [flow.zeros(longest, dtype=flow.uint8, device=device) for _ in range(world_size)]
    flow.comm.all_gather(gathered, padded)
    return [pickle.loads(bytes(t.numpy()[:int(s.item())].tolist())) for t, s in zip(gathered, sizes)]
