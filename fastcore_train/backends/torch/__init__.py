"""The PyTorch backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

import importlib
from typing import Any

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
    devices = list(device) if isinstance(device, (list, tuple)) else None
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        device = devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
        if not devices:
            raise ValueError("device=-1 asks for every CUDA GPU, but none is visible; pass device='cpu'.")
    world = world_from_environment() or world_from_process_group()
    if world is not None and world.world_size > 1:
        if devices is not None and len(devices) != world.world_size and len(devices) > 1:
            raise ValueError(f"device lists {len(devices)} devices but the launcher started "
                             f"{world.world_size} ranks; pass one device per rank, or device=None.")
        return TorchDDPDriver(model, _rank_device(device if devices is None or len(devices) > 1 else devices[0],
                                                  world.local_rank), world, fp16=fp16, **kwargs)
    if devices is not None and len(devices) > 1:
        if len(set(map(str, devices))) != len(devices) and any(str(d) != "cpu" for d in devices):
            raise ValueError(f"device={device!r} repeats a GPU; give each rank its own device.")
        world = World(rank=0, local_rank=0, world_size=len(devices))
        return TorchDDPDriver(model, devices[0], world, fp16=fp16, launch=True, **kwargs)
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise ValueError("The model is wrapped in DistributedDataParallel but no process group with several "
                         "ranks exists; pass the unwrapped model, or launch with torchrun.")
    kwargs.pop("output_from_new_proc", None)
    return TorchSingleDriver(model, device=devices[0] if devices else device, fp16=fp16, **kwargs)
