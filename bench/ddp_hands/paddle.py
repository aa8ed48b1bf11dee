"""Data parallel by hand in PaddlePaddle: ``init_parallel_env()`` (gloo on CPU), ``paddle.DataParallel``
and a ``DistributedBatchSampler``; ranks started by ``python -m paddle.distributed.launch``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import paddle
import paddle.distributed as dist
from paddle.io import DataLoader, Dataset, DistributedBatchSampler

from bench.hands.paddle import MLP  # the overhead bench's MLP, any sizes

NAME = "paddle"
SPLIT = "batch-slices"  # DistributedBatchSampler: rank r takes the r-th slice of every global batch
GLOBAL_BATCH = False


def version() -> str:
    return paddle.__version__


def configure(threads: int) -> None:
    paddle.set_device("cpu")
    paddle.base.core.set_num_threads(threads)  # what the Fleet driver does on CPU


class DictDataset(Dataset):
    def __init__(self, x: Any, y: Any) -> None:
        super().__init__()
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {"x": self.x[index], "y": self.y[index]}


def _model(sizes: tuple[int, ...], seed: int):
    paddle.seed(seed)  # every configuration starts from the same weights
    model = MLP(sizes)
    return model, paddle.optimizer.SGD(learning_rate=0.01, parameters=model.parameters())


def init(world_size: int) -> int:
    if world_size == 1:
        return 0
    dist.init_parallel_env()  # reads the launcher's PADDLE_* variables; gloo on CPU
    return dist.get_rank()


def hand_parts(x, y, sizes, batch_size: int, world_size: int, seed: int = 0):
    model, optimizer = _model(sizes, seed)
    dataset = DictDataset(x, y)
    if world_size == 1:
        return model, model, optimizer, DataLoader(dataset, batch_size=batch_size, shuffle=False)
    sampler = DistributedBatchSampler(dataset, batch_size=batch_size, shuffle=False)
    return model, paddle.DataParallel(model), optimizer, DataLoader(dataset, batch_sampler=sampler)


def hand_epoch(model, optimizer, loader, limit: Optional[int], on_step: Callable[[], None]) -> int:
    cross_entropy = paddle.nn.functional.cross_entropy
    model.train()
    done = 0
    for batch in loader:
        loss = cross_entropy(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
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


def weights(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]
