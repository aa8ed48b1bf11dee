"""The Jittor backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

from typing import Any

import jittor as jt

from fastcore_train.backends.jittor.demo import build_demo
from fastcore_train.backends.jittor.mpi_driver import JittorMPIDriver
from fastcore_train.backends.jittor.signals import restore_python_signal_handling
from fastcore_train.backends.jittor.single_driver import JittorSingleDriver

restore_python_signal_handling()  # importing jittor made any killed child process end this one

__all__ = ["JittorSingleDriver", "JittorMPIDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, jt.Module)


def seed_framework(seed: int) -> None:
    """Seed jittor's generator; under MPI each rank gets ``seed + rank * 2591`` (jittor's convention)."""
    jt.sync_all()  # pending random ops draw before the reseed, not after
    if jt.in_mpi:
        seed += int(jt.rank) * 2591
    jt.set_seed(seed % 0x7FFFFFFF)


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> JittorSingleDriver:
    """One process for one device; MPI data parallel under mpirun, or for a device list (which
    re-runs the script under mpirun)."""
    devices = list(device) if isinstance(device, (list, tuple)) else None
    if devices is not None and not devices:
        raise ValueError("device=[] lists no device; pass 'cpu', 'cuda', or one device per rank.")
    if jt.in_mpi and jt.world_size > 1:
        if devices is not None and len(devices) not in (1, jt.world_size):
            raise ValueError(f"device lists {len(devices)} devices but mpirun started {jt.world_size} ranks; "
                             "pass one device per rank, or device=None.")
        rank_device = devices[jt.rank if len(devices) > 1 else 0] if devices is not None else device
        return JittorMPIDriver(model, device=rank_device, fp16=fp16, **kwargs)
    if devices is not None and len(devices) > 1:
        kinds = {str(d).split(":")[0].replace("gpu", "cuda") for d in devices}
        if len(kinds) > 1:
            raise ValueError(f"device={device!r} mixes CPU and GPU ranks; give every rank the same kind of device.")
        return JittorMPIDriver(model, device=devices[0], fp16=fp16, launch_world_size=len(devices), **kwargs)
    kwargs.pop("output_from_new_proc", None)
    return JittorSingleDriver(model, device=devices[0] if devices else device, fp16=fp16, **kwargs)
