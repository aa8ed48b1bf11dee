"""Data parallel by hand in OneFlow: ``oneflow.nn.parallel.DistributedDataParallel`` and oneflow's
``DistributedSampler``; ranks started with oneflow's launcher variables (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), which ``import oneflow`` reads.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import oneflow as flow
from oneflow.nn.parallel import DistributedDataParallel
from oneflow.utils.data import DataLoader, Dataset
from oneflow.utils.data.distributed import DistributedSampler

from bench.hands.oneflow import MLP  # the overhead bench's MLP, any sizes

NAME = "oneflow"
SPLIT = "strided"
GLOBAL_BATCH = False


def version() -> str:
    return flow.__version__


def configure(threads: int) -> None:
    flow.set_num_threads(threads)  # what the DDP driver does on CPU


class DictDataset(Dataset):
    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = flow.from_numpy(x), flow.from_numpy(y)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, flow.Tensor]:
        return {"x": self.x[index], "y": self.y[index]}


def _model(sizes: tuple[int, ...], seed: int):
    flow.manual_seed(seed)  # every configuration starts from the same weights
    model = MLP(sizes)
    return model, flow.optim.SGD(model.parameters(), lr=0.01)


def init(world_size: int) -> int:
    """OneFlow joined the job when it was imported (from the launcher's variables)."""
    if flow.env.get_world_size() != world_size:
        raise RuntimeError(f"oneflow was imported with world size {flow.env.get_world_size()}, expected {world_size}")
    return flow.env.get_rank()


def hand_parts(x, y, sizes, batch_size: int, world_size: int, seed: int = 0):
    model, optimizer = _model(sizes, seed)
    dataset = DictDataset(x, y)
    if world_size == 1:
        return model, model, optimizer, DataLoader(dataset, batch_size=batch_size, shuffle=False)
    sampler = DistributedSampler(dataset, shuffle=False)
    return model, DistributedDataParallel(model), optimizer, DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def hand_epoch(model, optimizer, loader, limit: Optional[int], on_step: Callable[[], None]) -> int:
    cross_entropy = flow.nn.functional.cross_entropy
    model.train()
    done = 0
    for batch in loader:
        loss = cross_entropy(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()  # oneflow's default (set_to_none=False), as the driver's
        on_step()
        done += 1
        if done == limit:
            break
    return done


def trainer_parts(x, y, sizes, batch_size: int, world_size: int, seed: int = 0):
    model, optimizer = _model(sizes, seed)
    return model, optimizer, DataLoader(DictDataset(x, y), batch_size=batch_size, shuffle=False)


def barrier() -> None:
    if flow.env.get_world_size() > 1:
        flow.comm.barrier()


def finish() -> None:
    flow._oneflow_internal.eager.Sync()  # oneflow runs ops asynchronously: wait for them


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
