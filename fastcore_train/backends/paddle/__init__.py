"""The PaddlePaddle backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

from typing import Any

import paddle

from fastcore_train.backends.paddle.demo import build_demo
from fastcore_train.backends.paddle.devices import DEVICES, parse_device
from fastcore_train.backends.paddle.fleet_driver import PaddleFleetDriver
from fastcore_train.backends.paddle.single_driver import PaddleSingleDriver
from fastcore_train.backends.paddle.world import world_from_environment, world_from_process_group
from fastcore_train.parallel.placement import place_ranks

__all__ = ["PaddleSingleDriver", "PaddleFleetDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, paddle.nn.Layer)


def seed_framework(seed: int) -> None:
    paddle.seed(seed)  # seeds the CPU generator and every GPU's


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> PaddleSingleDriver:
    """Single process for one device; Fleet data parallel for a device list, paddle's launcher
    environment, or a parallel environment (or ``paddle.DataParallel`` model) the user set up."""
    placement = place_ranks(device, world_from_environment() or world_from_process_group(), DEVICES)
    if placement.is_distributed:
        return PaddleFleetDriver(model, parse_device(placement.device), placement.facts, fp16=fp16,
                                 launch_devices=[parse_device(d) for d in placement.devices] or None, **kwargs)
    if isinstance(model, paddle.DataParallel):
        raise ValueError("The model is wrapped in paddle.DataParallel but no parallel environment with several "
                         "ranks exists; pass the unwrapped model, or launch with python -m paddle.distributed.launch.")
    kwargs.pop("output_from_new_proc", None)
    return PaddleSingleDriver(model, device=placement.device, fp16=fp16, **kwargs)
