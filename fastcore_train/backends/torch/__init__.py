"""The PyTorch backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

from typing import Any

import torch

from fastcore_train.backends.torch.demo import build_demo
from fastcore_train.backends.torch.single_driver import TorchSingleDriver

__all__ = ["TorchSingleDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def is_model(model: Any) -> bool:
    return isinstance(model, torch.nn.Module)


def seed_framework(seed: int) -> None:
    torch.manual_seed(seed)  # seeds the CPU generator and every CUDA device's


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> TorchSingleDriver:
    """Build the torch driver for ``device`` (one device: single process)."""
    devices = device if isinstance(device, (list, tuple)) else [device]
    if len(devices) > 1 or (isinstance(device, int) and not isinstance(device, bool) and device < 0):
        raise ValueError(
            f"device={device!r} asks for several devices, but this version of fastcore_train runs "
            "torch in one process only; pass a single device such as 'cpu', 'cuda:0' or 0."
        )
    return TorchSingleDriver(model, device=devices[0], fp16=fp16, **kwargs)
