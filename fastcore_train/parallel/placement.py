"""Reading ``device=``: one process, ranks of a launched job, or ranks to start ourselves.

Written once for every backend. A backend supplies :class:`DeviceRules` (its framework's
visible GPUs and a launched rank's default device) and the rank facts of a job it is already
part of (from its launcher's variables, or a process group the user set up);
:func:`place_ranks` decides the rest, with the same errors everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from fastcore_train.parallel.environment import SINGLE_PROCESS, RankFacts


class DeviceUnavailableError(ValueError):
    """The device asked for is not on this machine or not usable by this build of the framework
    (no GPU, a CPU-only build, fewer GPUs than named): a fact of the setup, not of the code."""


class DeviceRules(Protocol):
    """What ``device=`` needs from one framework; implemented in each backend's ``devices.py``."""

    framework: str

    def all_gpus(self) -> list[Any]:
        """Every accelerator this process can see (``device=-1``); empty on a CPU machine."""

    def default_rank_device(self, facts: RankFacts) -> Any:
        """A launched rank's device when ``device=None``."""


def device_name(device: Any) -> str:
    """A device's name for comparing a device list: ``"cpu"``, ``"gpu"`` or ``"gpu:N"``, however
    the framework spells it (``"cuda:1"``, ``1``, ``torch.device``, paddle's ``Place(gpu:1)``).
    Nothing is checked against the machine here; each driver does that when it parses its device."""
    if isinstance(device, int) and not isinstance(device, bool):
        return f"gpu:{device}"
    text = str(device).strip().lower().replace("cuda", "gpu")
    if text.startswith("place(") and text.endswith(")"):
        text = text[len("place("):-1]
    return text


@dataclass(frozen=True)
class Placement:
    """Where this process runs: its rank facts, its device (as the user named it), and whether
    it must start the other ranks itself (then ``devices`` holds every rank's device)."""

    facts: RankFacts
    device: Any
    launch: bool = False
    devices: list[Any] = field(default_factory=list)

    @property
    def is_distributed(self) -> bool:
        return self.facts.is_distributed


def _device_list(device: Any, rules: DeviceRules) -> Optional[list[Any]]:
    """The devices of a data-parallel request (a list, or -1 for every GPU); None for one device."""
    if isinstance(device, (list, tuple)):
        if not device:
            raise ValueError("device=[] lists no device; pass 'cpu', a GPU index, or one device per rank.")
        return list(device)
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        if device != -1:
            raise ValueError(f"device={device} is not a GPU index; pass -1 for every GPU.")
        gpus = rules.all_gpus()
        if not gpus:
            raise DeviceUnavailableError(
                f"device=-1 asks for every GPU, but none is visible (this {rules.framework} sees none); "
                "pass device='cpu'.")
        return gpus
    return None


def place_ranks(device: Any, launched: Optional[RankFacts], rules: DeviceRules) -> Placement:
    """Decide this process's place from ``device=`` and the job it is part of (``launched``).

    - Part of a launched job with several ranks: this rank's device is its entry of a device
      list (by local rank), the one device given, or the framework's default for the rank.
    - Not launched, several devices: this process becomes rank 0 of a job it starts itself.
    - Otherwise one process on one device.
    """
    devices = _device_list(device, rules)
    if launched is not None and launched.is_distributed:
        if devices is not None and len(devices) not in (1, launched.world_size):
            raise ValueError(f"device lists {len(devices)} devices but the launcher started {launched.world_size} "
                             "ranks; pass one device per rank, or device=None.")
        if devices is not None:
            rank_device = devices[launched.local_rank if len(devices) > 1 else 0]
        elif device is None:
            rank_device = rules.default_rank_device(launched)
        else:
            rank_device = device
        return Placement(launched, rank_device)
    if devices is not None and len(devices) > 1:
        names = [device_name(d) for d in devices]
        gpus = [name for name in names if name != "cpu"]
        if gpus and len(gpus) != len(names):
            raise ValueError(f"device={device!r} mixes CPU and GPU ranks; give every rank the same kind of device.")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"device={device!r} repeats a GPU; give each rank its own device.")
        facts = RankFacts(rank=0, local_rank=0, world_size=len(devices), launcher="self-launched")
        return Placement(facts, devices[0], launch=True, devices=devices)
    return Placement(SINGLE_PROCESS, devices[0] if devices else device)
