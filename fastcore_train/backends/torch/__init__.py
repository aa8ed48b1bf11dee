"""The PyTorch backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Optional

import torch

from fastcore_train.backends.torch.ddp_driver import TorchDDPDriver
from fastcore_train.backends.torch.demo import build_demo
from fastcore_train.backends.torch.single_driver import TorchSingleDriver
from fastcore_train.backends.torch.world import World, world_from_environment, world_from_process_group

__all__ = ["TorchSingleDriver", "TorchDDPDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, torch.nn.Module)


def seed_framework(seed: int) -> None:
    torch.manual_seed(seed)  # seeds the CPU generator and every CUDA device's


def _rank_device(device: Any, local_rank: int) -> Any:
    """This rank's device: its entry of a device list, the given one, or cuda:LOCAL_RANK / cpu."""
    if isinstance(device, (list, tuple)):
        return device[local_rank]
    if device is None:
        return torch.device("cuda", local_rank) if torch.cuda.is_available() else "cpu"
    return device


@dataclass(frozen=True)
class Placement:
    """Where a data-parallel rank runs: its world, its device, and whether it starts the others."""

    world: World
    device: Any
    launch: bool


def place_ranks(device: Any) -> tuple[Optional[Placement], Any]:
    """``(placement, None)`` for data parallel, or ``(None, device)`` for one process.

    Data parallel comes from a launcher's environment (torchrun), a process group the user
    initialised, or a device list (this process then becomes rank 0 and starts the others).
    Shared by every torch driver so that they all read ``device=`` the same way.
    """
    devices = list(device) if isinstance(device, (list, tuple)) else None
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        device = devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
        if not devices:
            raise ValueError("device=-1 asks for every CUDA GPU, but none is visible; pass device='cpu'.")
    world = world_from_environment() or world_from_process_group()
    if world is not None and world.world_size > 1:
        if devices is not None and len(devices) > 1 and len(devices) != world.world_size:
            raise ValueError(f"device lists {len(devices)} devices but the launcher started "
                             f"{world.world_size} ranks; pass one device per rank, or device=None.")
        rank_device = _rank_device(device if devices is None or len(devices) > 1 else devices[0], world.local_rank)
        return Placement(world, rank_device, launch=False), None
    if devices is not None and len(devices) > 1:
        if len(set(map(str, devices))) != len(devices) and any(str(d) != "cpu" for d in devices):
            raise ValueError(f"device={device!r} repeats a GPU; give each rank its own device.")
        return Placement(World(rank=0, local_rank=0, world_size=len(devices)), devices[0], launch=True), None
    return None, devices[0] if devices else device


def data_parallel_placement(driver_name: str, model: torch.nn.Module, device: Any) -> Placement:
    """The placement of a driver that only exists data-parallel (sharding needs several ranks)."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise ValueError(f"driver={driver_name!r} wraps the model itself; pass the model without "
                         "DistributedDataParallel around it.")
    placement, _ = place_ranks(device)
    if placement is None:
        raise ValueError(
            f"driver={driver_name!r} shards training across processes, but device={device!r} gives one. Pass one "
            "device per rank (e.g. device=['cpu', 'cpu'] or [0, 1]), or start the script with torchrun.")
    return placement


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> TorchSingleDriver:
    """Single process for one device; DDP for a device list, a launcher's environment, or a
    process group / DDP model the user set up. ``fairscale``, ``torch_fsdp`` and ``deepspeed``
    live in their own modules (``<name>_driver.create_driver``), imported only when named."""
    if driver_name != "torch":
        module = importlib.import_module(f"fastcore_train.backends.torch.{driver_name}_driver")
        return module.create_driver(model, device=device, fp16=fp16, **kwargs)
    for other in ("fairscale_kwargs", "deepspeed_kwargs", "torch_fsdp_kwargs"):
        kwargs.pop(other, None)
    placement, single_device = place_ranks(device)
    if placement is not None:
        return TorchDDPDriver(model, placement.device, placement.world, fp16=fp16, launch=placement.launch, **kwargs)
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise ValueError("The model is wrapped in DistributedDataParallel but no process group with several "
                         "ranks exists; pass the unwrapped model, or launch with torchrun.")
    kwargs.pop("output_from_new_proc", None)
    return TorchSingleDriver(model, device=single_device, fp16=fp16, **kwargs)
