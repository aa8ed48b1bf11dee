"""The OneFlow backend: its drivers, and the model-type check used by ``choose_driver``.

``import oneflow`` builds oneflow's process-wide distributed environment from ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` when it is first imported, and it cannot be
rebuilt afterwards. A data-parallel job self-launched from a plain ``python train.py`` therefore
runs every rank, rank 0 included, in a new process; the original one only supervises them.
"""
from __future__ import annotations

from typing import Any

import oneflow as flow

from fastcore_train.backends.oneflow.parallel_driver import OneflowDDPDriver
from fastcore_train.backends.oneflow.demo import build_demo
from fastcore_train.backends.oneflow.single_driver import OneflowSingleDriver, parse_device
from fastcore_train.backends.oneflow.devices import DEVICES
from fastcore_train.backends.oneflow.world import launch_environments, world_from_environment
from fastcore_train.drivers.registry import get_backend
from fastcore_train.parallel.launcher import choose_launcher
from fastcore_train.parallel.placement import place_ranks

__all__ = ["OneflowSingleDriver", "OneflowDDPDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, flow.nn.Module)


def seed_framework(seed: int) -> None:
    flow.manual_seed(seed)  # the CPU generator and every CUDA device's


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> OneflowSingleDriver:
    """Single process for one device; DDP under oneflow's launcher, or self-launched for a list."""
    output_from_new_proc = kwargs.pop("output_from_new_proc", "only_error")
    placement = place_ranks(device, world_from_environment(), DEVICES)
    if placement.is_distributed:
        for rank_device in placement.devices:
            parse_device(rank_device)  # a bad device is an error here, not in a rank started later
        driver = OneflowDDPDriver(model, placement.device, placement.facts, fp16=fp16, **kwargs)
        # oneflow fixes a process's rank at import: every rank, rank 0 included, runs in a new process.
        variables = launch_environments(placement.facts.world_size) if placement.launch else None
        driver.launcher = choose_launcher(placement, "spawn-all", variables, output_from_new_proc,
                                          get_backend("oneflow").import_rendezvous(variables or []))
        return driver
    if getattr(model, "_is_ddp_module", False):
        raise ValueError("The model went through oneflow.nn.parallel.DistributedDataParallel but this process is "
                         "not a rank of a job; pass the plain model, or launch with python -m "
                         "oneflow.distributed.launch.")
    return OneflowSingleDriver(model, device=placement.device, fp16=fp16, **kwargs)
