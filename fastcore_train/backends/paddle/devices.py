"""Turning the Trainer's ``device`` into paddle's device strings (``"cpu"``, ``"gpu:N"``)."""
from __future__ import annotations

from typing import Any

import os

import paddle

from fastcore_train.parallel.environment import RankFacts
from fastcore_train.parallel.placement import DeviceUnavailableError

_FORMS = ("'cpu', 'gpu', 'gpu:N' (or 'cuda', 'cuda:N'), a GPU index, a paddle Place, or None "
          "(paddle's current device)")


def gpu_count() -> int:
    """GPUs this paddle can use (0 for a CPU build)."""
    if not paddle.is_compiled_with_cuda():
        return 0
    return paddle.device.cuda.device_count()


def _from_place(place: Any) -> str:
    if place.is_cpu_place():
        return "cpu"
    if place.is_gpu_place():
        return f"gpu:{place.gpu_device_id()}"
    raise ValueError(f"device={place!r} is not a CPU or GPU place; pass {_FORMS}.")


def parse_device(device: Any) -> str:
    """``"cpu"`` or ``"gpu:N"`` for one device; a clear ValueError for anything else."""
    if device is None:
        device = paddle.get_device()
    if isinstance(device, paddle.base.libpaddle.Place) or type(device).__name__.endswith("Place"):
        parsed = _from_place(device)
    elif isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise ValueError(f"device={device} is not a GPU index; pass {_FORMS}.")
        parsed = f"gpu:{device}"
    elif isinstance(device, str):
        text = device.strip().lower().replace("cuda", "gpu")
        kind, _, index = text.partition(":")
        if kind == "cpu" and not index:
            parsed = "cpu"
        elif kind == "gpu" and (not index or index.isdigit()):
            parsed = f"gpu:{index or 0}"
        else:
            raise ValueError(f"device={device!r} is not a paddle device; pass {_FORMS}.")
    else:
        raise ValueError(f"device must be a str, int, paddle Place or None, got {type(device).__name__}; "
                         f"pass {_FORMS}.")
    if parsed.startswith("gpu"):
        available = gpu_count()
        if available == 0:
            raise DeviceUnavailableError(f"device={device!r} needs a GPU, but this paddle cannot use one (a CPU "
                                         "build, or no GPU visible); pass device='cpu', or install paddlepaddle-gpu.")
        if int(parsed.split(":")[1]) >= available:
            raise DeviceUnavailableError(f"device={device!r}: only {available} GPU(s) are visible.")
    return parsed


def is_gpu(device: str) -> bool:
    return device.startswith("gpu")


class PaddleDevices:
    """What the shared reading of ``device=`` needs from paddle (:mod:`fastcore_train.parallel.placement`)."""

    framework = "paddle"

    def all_gpus(self) -> list[Any]:
        return [f"gpu:{index}" for index in range(gpu_count())]

    def default_rank_device(self, facts: RankFacts) -> Any:
        """The GPU paddle's launcher selected for this rank, or the CPU (gloo jobs, CPU builds)."""
        if gpu_count() == 0 or os.environ.get("PADDLE_DISTRI_BACKEND") == "gloo":
            return "cpu"
        return f"gpu:{paddle.distributed.ParallelEnv().device_id}"


DEVICES = PaddleDevices()
