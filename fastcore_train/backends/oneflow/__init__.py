"""The OneFlow backend: its drivers, and the model-type check used by ``choose_driver``.

``import oneflow`` builds oneflow's process-wide distributed environment from ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` when it is first imported, and it cannot be
rebuilt afterwards. A data-parallel job self-launched from a plain ``python train.py`` therefore
runs every rank, rank 0 included, in a new process; the original one only supervises them.
"""
from __future__ import annotations

from typing import Any, Optional

import oneflow as flow

from fastcore_train.backends.oneflow.ddp_driver import OneflowDDPDriver
from fastcore_train.backends.oneflow.demo import build_demo
from fastcore_train.backends.oneflow.single_driver import OneflowSingleDriver, parse_device
from fastcore_train.backends.oneflow.world import World, world_from_environment

__all__ = ["OneflowSingleDriver", "OneflowDDPDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, flow.nn.Module)


def seed_framework(seed: int) -> None:
    flow.manual_seed(seed)  # the CPU generator and every CUDA device's


def _device_list(device: Any) -> Optional[list[Any]]:
    """The devices of a data-parallel request (a list, or -1 for every GPU); None for one device."""
    if isinstance(device, (list, tuple)):
        if not device:
            raise ValueError("device=[] lists no device; pass 'cpu', a GPU index, or one device per rank.")
        return list(device)
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        if device != -1:
            raise ValueError(f"device={device} is not a GPU index; pass -1 for every GPU.")
        if flow.cuda.device_count() == 0:
            raise ValueError("device=-1 asks for every GPU, but this oneflow sees none; pass device='cpu'.")
        return [f"cuda:{index}" for index in range(flow.cuda.device_count())]
    return None


def _rank_device(device: Any, devices: Optional[list[Any]], world: World) -> Any:
    if devices is not None:
        return devices[world.local_rank if len(devices) > 1 else 0]
    if device is None:
        return f"cuda:{world.local_rank}" if flow.cuda.is_available() else "cpu"
    return device


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> OneflowSingleDriver:
    """Single process for one device; DDP under oneflow's launcher, or self-launched for a list."""
    devices = _device_list(device)
    world = world_from_environment()
    if world is not None:
        if devices is not None and len(devices) not in (1, world.world_size):
            raise ValueError(f"device lists {len(devices)} devices but the launcher started {world.world_size} "
                             "ranks; pass one device per rank, or device=None.")
        return OneflowDDPDriver(model, _rank_device(device, devices, world), world, fp16=fp16, **kwargs)
    if devices is not None and len(devices) > 1:
        parsed = [parse_device(d) for d in devices]
        gpus = [d.index for d in parsed if d.type == "cuda"]
        if gpus and len(gpus) != len(parsed):
            raise ValueError(f"device={device!r} mixes CPU and GPU ranks; give every rank the same kind of device.")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"device={device!r} repeats a GPU; give each rank its own device.")
        world = World(rank=0, local_rank=0, world_size=len(devices))
        return OneflowDDPDriver(model, devices[0], world, fp16=fp16, supervise=True, **kwargs)
    if getattr(model, "_is_ddp_module", False):
        raise ValueError("The model went through oneflow.nn.parallel.DistributedDataParallel but this process is "
                         "not a rank of a job; pass the plain model, or launch with python -m "
                         "oneflow.distributed.launch.")
    kwargs.pop("output_from_new_proc", None)
    return OneflowSingleDriver(model, device=devices[0] if devices else device, fp16=fp16, **kwargs)
