"""The PaddlePaddle backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

from typing import Any, Optional

import paddle

from fastcore_train.backends.paddle.demo import build_demo
from fastcore_train.backends.paddle.devices import DEVICES, is_gpu, parse_device
from fastcore_train.backends.paddle.parallel_driver import PaddleFleetDriver
from fastcore_train.backends.paddle.single_driver import PaddleSingleDriver
from fastcore_train.backends.paddle.world import launch_environments, world_from_environment, world_from_process_group
from fastcore_train.parallel.launcher import choose_launcher
from fastcore_train.parallel.placement import Placement, place_ranks

__all__ = ["PaddleSingleDriver", "PaddleFleetDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, paddle.nn.Layer)


def seed_framework(seed: int) -> None:
    paddle.seed(seed)  # seeds the CPU generator and every GPU's


def _self_launch_variables(placement: Placement) -> Optional[list[dict[str, str]]]:
    """Paddle's launcher variables for each rank of a job this process starts (gloo on CPU, nccl on GPUs)."""
    if not placement.launch:
        return None
    devices = [parse_device(device) for device in placement.devices]
    gpus = [int(device.split(":")[1]) for device in devices] if is_gpu(devices[0]) else None
    return launch_environments(placement.facts.world_size, "nccl" if gpus else "gloo", gpus)


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> PaddleSingleDriver:
    """Single process for one device; Fleet data parallel for a device list, paddle's launcher
    environment, or a parallel environment (or ``paddle.DataParallel`` model) the user set up."""
    output_from_new_proc = kwargs.pop("output_from_new_proc", "only_error")
    model_parallel_kwargs = kwargs.pop("paddle_model_parallel_kwargs", None)
    placement = place_ranks(device, world_from_environment() or world_from_process_group(), DEVICES)
    if driver_name == "paddle_model_parallel":
        if not placement.is_distributed:
            raise ValueError("driver='paddle_model_parallel' splits the model across several ranks: pass one device "
                             "per rank (device=['cpu', 'cpu'], or GPU ids) or launch with python -m "
                             "paddle.distributed.launch --nproc_per_node N.")
        from fastcore_train.backends.paddle.model_parallel_driver import PaddleModelParallelDriver

        driver = PaddleModelParallelDriver(model, parse_device(placement.device), placement.facts, fp16=fp16,
                                           paddle_model_parallel_kwargs=model_parallel_kwargs, **kwargs)
        driver.launcher = choose_launcher(placement, "spawn", _self_launch_variables(placement), output_from_new_proc)
        return driver
    if model_parallel_kwargs is not None:
        raise ValueError("paddle_model_parallel_kwargs is for driver='paddle_model_parallel'; this is "
                         f"driver={driver_name!r}.")
    if placement.is_distributed:
        driver = PaddleFleetDriver(model, parse_device(placement.device), placement.facts, fp16=fp16, **kwargs)
        driver.launcher = choose_launcher(placement, "spawn", _self_launch_variables(placement), output_from_new_proc)
        return driver
    if isinstance(model, paddle.DataParallel):
        raise ValueError("The model is wrapped in paddle.DataParallel but no parallel environment with several "
                         "ranks exists; pass the unwrapped model, or launch with python -m paddle.distributed.launch.")
    return PaddleSingleDriver(model, device=placement.device, fp16=fp16, **kwargs)
