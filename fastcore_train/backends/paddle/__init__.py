"""The PaddlePaddle backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

import os
from typing import Any

import paddle

from fastcore_train.backends.paddle.demo import build_demo
from fastcore_train.backends.paddle.devices import gpu_count, parse_device
from fastcore_train.backends.paddle.fleet_driver import PaddleFleetDriver
from fastcore_train.backends.paddle.single_driver import PaddleSingleDriver
from fastcore_train.backends.paddle.world import World, world_from_environment, world_from_process_group

__all__ = ["PaddleSingleDriver", "PaddleFleetDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, paddle.nn.Layer)


def seed_framework(seed: int) -> None:
    paddle.seed(seed)  # seeds the CPU generator and every GPU's


def _device_list(device: Any) -> list[str] | None:
    """The devices of a data-parallel request (a list, or -1 for every GPU); None for one device."""
    if isinstance(device, (list, tuple)):
        if not device:
            raise ValueError("device=[] lists no device; pass 'cpu', a GPU index, or one device per rank.")
        return [parse_device(d) for d in device]
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        if device != -1:
            raise ValueError(f"device={device} is not a GPU index; pass -1 for every GPU.")
        if gpu_count() == 0:
            raise ValueError("device=-1 asks for every GPU, but this paddle sees none; pass device='cpu'.")
        return [f"gpu:{index}" for index in range(gpu_count())]
    return None


def _default_rank_device() -> str:
    """A launched rank's device when none is given: the GPU its launcher selected, or the CPU."""
    if gpu_count() == 0 or os.environ.get("PADDLE_DISTRI_BACKEND") == "gloo":
        return "cpu"
    return f"gpu:{paddle.distributed.ParallelEnv().device_id}"


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> PaddleSingleDriver:
    """Single process for one device; Fleet data parallel for a device list, paddle's launcher
    environment, or a parallel environment (or ``paddle.DataParallel`` model) the user set up."""
    devices = _device_list(device)
    world = world_from_environment() or world_from_process_group()
    if world is not None and world.world_size > 1:
        if devices is not None and len(devices) not in (1, world.world_size):
            raise ValueError(f"device lists {len(devices)} devices but the launcher started {world.world_size} "
                             "ranks; pass one device per rank, or device=None.")
        if devices is not None:
            rank_device = devices[world.local_rank if len(devices) > 1 else 0]
        elif device is None:
            rank_device = _default_rank_device()
        else:
            rank_device = parse_device(device)
        return PaddleFleetDriver(model, rank_device, world, fp16=fp16, **kwargs)
    if devices is not None and len(devices) > 1:
        gpus = [d for d in devices if d != "cpu"]
        if gpus and len(gpus) != len(devices):
            raise ValueError(f"device={device!r} mixes CPU and GPU ranks; give every rank the same kind of device.")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"device={device!r} repeats a GPU; give each rank its own device.")
        world = World(rank=0, local_rank=0, world_size=len(devices))
        return PaddleFleetDriver(model, devices[0], world, fp16=fp16, launch_devices=devices, **kwargs)
    if isinstance(model, paddle.DataParallel):
        raise ValueError("The model is wrapped in paddle.DataParallel but no parallel environment with several "
                         "ranks exists; pass the unwrapped model, or launch with python -m paddle.distributed.launch.")
    kwargs.pop("output_from_new_proc", None)
    return PaddleSingleDriver(model, device=devices[0] if devices else device, fp16=fp16, **kwargs)
