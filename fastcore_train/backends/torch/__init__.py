"""The PyTorch backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

import importlib
from typing import Any

import torch

from fastcore_train.backends.torch.parallel_driver import TorchDDPDriver
from fastcore_train.backends.torch.demo import build_demo
from fastcore_train.backends.torch.single_driver import TorchSingleDriver
from fastcore_train.backends.torch.devices import DEVICES
from fastcore_train.backends.torch.world import world_from_environment, world_from_process_group
from fastcore_train.parallel.launch import free_port
from fastcore_train.parallel.environment import TORCHRUN
from fastcore_train.parallel.launcher import Launcher, choose_launcher
from fastcore_train.parallel.placement import Placement
from fastcore_train.parallel.placement import place_ranks as shared_place_ranks

__all__ = ["TorchSingleDriver", "TorchDDPDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, torch.nn.Module)


def seed_framework(seed: int) -> None:
    torch.manual_seed(seed)  # seeds the CPU generator and every CUDA device's


def place_ranks(device: Any) -> Placement:
    """Where this process runs, from ``device=`` and torchrun's variables or a process group the
    user initialised (the reading itself is shared by every backend)."""
    return shared_place_ranks(device, world_from_environment() or world_from_process_group(), DEVICES)


def launcher_for(placement: Placement, output_from_new_proc: str = "only_error") -> Launcher:
    """How this job's ranks start: for a self-launch, rank 0 spawns the others with torchrun's variables."""
    variables = None
    if placement.launch:
        port, world_size = free_port(), placement.facts.world_size
        variables = [TORCHRUN.variables_for(rank, world_size, "127.0.0.1", port) for rank in range(world_size)]
    return choose_launcher(placement, "spawn", variables, output_from_new_proc)


def with_launcher(driver: TorchSingleDriver, placement: Placement, output_from_new_proc: str) -> TorchSingleDriver:
    """``driver`` with the launcher its placement needs."""
    driver.launcher = launcher_for(placement, output_from_new_proc)
    return driver


def data_parallel_placement(driver_name: str, model: torch.nn.Module, device: Any) -> Placement:
    """The placement of a driver that only exists data-parallel (sharding needs several ranks)."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise ValueError(f"driver={driver_name!r} wraps the model itself; pass the model without "
                         "DistributedDataParallel around it.")
    placement = place_ranks(device)
    if not placement.is_distributed:
        raise ValueError(
            f"driver={driver_name!r} shards training across processes, but device={device!r} gives one. Pass one "
            "device per rank (e.g. device=['cpu', 'cpu'] or [0, 1]), or start the script with torchrun.")
    return placement


_SHARDING_KWARGS = ("fairscale_kwargs", "torch_fsdp_kwargs", "deepspeed_kwargs", "torch_model_parallel_kwargs")


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> TorchSingleDriver:
    """Single process for one device; DDP for a device list, a launcher's environment, or a
    process group / DDP model the user set up. ``fairscale``, ``torch_fsdp``, ``deepspeed`` and
    ``torch_model_parallel``
    live in their own modules (``<name>_driver.create_driver``), imported only when named; each
    receives only its own ``<name>_kwargs``."""
    sharding_options = {key: kwargs.pop(key, None) for key in _SHARDING_KWARGS}
    output_from_new_proc = kwargs.pop("output_from_new_proc", "only_error")
    if driver_name != "torch":
        module = importlib.import_module(f"fastcore_train.backends.torch.{driver_name}_driver")
        return module.create_driver(model, device, fp16, sharding_options[f"{driver_name}_kwargs"],
                                    output_from_new_proc, **kwargs)
    placement = place_ranks(device)
    if placement.is_distributed:
        return with_launcher(TorchDDPDriver(model, placement.device, placement.facts, fp16=fp16, **kwargs), placement,
                             output_from_new_proc)
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise ValueError("The model is wrapped in DistributedDataParallel but no process group with several "
                         "ranks exists; pass the unwrapped model, or launch with torchrun.")
    return TorchSingleDriver(model, device=placement.device, fp16=fp16, **kwargs)
