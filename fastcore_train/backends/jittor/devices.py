"""Turning the Trainer's ``device`` into jittor's one switch, ``jt.flags.use_cuda``."""
from __future__ import annotations

from typing import Any

import jittor as jt

from fastcore_train.parallel.environment import RankFacts
from fastcore_train.parallel.placement import DeviceUnavailableError

_FORMS = "'cpu', 'cuda' (or 'gpu', 'cuda:N'), a GPU index, or None (jittor's current setting)"


def parse_device(device: Any) -> str:
    """``"cpu"`` or ``"cuda"``: jittor runs a process on the CPU or on its one visible GPU.

    A GPU index other than 0 is refused: jittor picks the GPU from ``CUDA_VISIBLE_DEVICES``.
    """
    if device is None:
        return "cuda" if jt.flags.use_cuda else "cpu"
    if isinstance(device, bool) or not isinstance(device, (str, int)):
        raise ValueError(f"device must be a str, int or None, got {type(device).__name__}; pass {_FORMS}.")
    text = str(device).strip().lower().replace("gpu", "cuda")
    if isinstance(device, int):
        text = f"cuda:{device}"
    kind, _, index = text.partition(":")
    if kind == "cpu" and not index:
        return "cpu"
    if kind != "cuda" or (index and not index.isdigit()):
        raise ValueError(f"device={device!r} is not a jittor device; pass {_FORMS}.")
    if not jt.has_cuda:
        raise DeviceUnavailableError(f"device={device!r} needs CUDA, which this jittor cannot use (no CUDA found, or "
                         "nvcc_path=''); pass device='cpu'.")
    if index and int(index) != 0:
        raise ValueError(f"device={device!r}: jittor uses one GPU per process; select it with "
                         "CUDA_VISIBLE_DEVICES and pass device='cuda'.")
    return "cuda"


def use_device(device: str) -> None:
    """Make ``device`` jittor's current one (the flag is process-wide)."""
    jt.flags.use_cuda = 1 if device == "cuda" else 0


class JittorDevices:
    """What the shared reading of ``device=`` needs from jittor (:mod:`fastcore_train.parallel.placement`)."""

    framework = "jittor"

    def all_gpus(self) -> list[Any]:
        """Jittor runs one GPU per process; a job over every GPU is one rank per visible GPU."""
        return []

    def default_rank_device(self, facts: RankFacts) -> Any:
        return parse_device(None)


DEVICES = JittorDevices()
