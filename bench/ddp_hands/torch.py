"""Data parallel by hand in PyTorch: ``DistributedDataParallel`` over gloo, a ``DistributedSampler``.

Ranks are started with torchrun's variables (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ...).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from bench.hands.torch import MLP  # the overhead bench's MLP, any sizes

NAME = "torch"
SPLIT = "strided"
GLOBAL_BATCH = False


def version() -> str:
    return torch.__version__


def configure(threads: int) -> None:
    torch.set_num_threads(threads)  # what the DDP driver does on CPU


class DictDataset(Dataset):
    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "y": self.y[index]}


def _model(sizes: tuple[int, ...], seed: int):
    torch.manual_seed(seed)  # every configuration starts from the same weights
    model = MLP(sizes)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def init(world_size: int) -> int:
    if world_size == 1:
        return 0
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    return dist.get_rank()


def hand_parts(x, y, sizes, batch_size: int, world_size: int, seed: int = 0):
    model, optimizer = _model(sizes, seed)
    dataset = DictDataset(x, y)
    if world_size == 1:
        return model, model, optimizer, DataLoader(dataset, batch_size=batch_size, shuffle=False)
    sampler = DistributedSampler(dataset, shuffle=False)
    return (model, torch.nn.parallel.DistributedDataParallel(model), optimizer,
            DataLoader(dataset, batch_size=batch_size, sampler=sampler))


def hand_epoch(model, optimizer, loader, limit: Optional[int], on_step: Callable[[], None]) -> int:
    cross_entropy = torch.nn.functional.cross_entropy
    model.train()
    done = 0
    for batch in loader:
        loss = cross_entropy(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        on_step()
        done += 1
        if done == limit:
            break
    return done


def trainer_parts(x, y, sizes, batch_size: int, world_size: int, seed: int = 0):
    model, optimizer = _model(sizes, seed)
    return model, optimizer, DataLoader(DictDataset(x, y), batch_size=batch_size, shuffle=False)


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def finish() -> None:
    """Eager and synchronous on CPU: nothing is queued."""


def close() -> None:
    """Leave the process group, as a torch DDP script ends: a gloo group left to the interpreter's exit
    can abort it ("terminate called without an active exception")."""
    if dist.is_initialized():
        dist.destroy_process_group()


def weights(model) -> list:
    return [p.detach().numpy().copy() for p in model.parameters()]
