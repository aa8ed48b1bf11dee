"""Reading one ``device=`` for the frameworks that name devices as torch does (torch, oneflow):
``"cpu"``, ``"cuda"``, ``"cuda:N"``, a GPU index, the framework's device class, or None.

Written once; a backend passes its device class, its ``cuda`` module (``is_available``,
``device_count``, ``current_device``) and which exceptions its device class raises for a bad
name, and gets the same checks and error messages as every other such backend.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from fastcore_train.parallel.placement import DeviceUnavailableError


def parse_cuda_device(device: Any, model: Optional[Any], *, framework: str, device_class: Callable[..., Any],
                      cuda: Any, name_errors: tuple[type[BaseException], ...], cpu_or_cuda_only: bool = False) -> Any:
    """A ``device_class`` instance for one device; None means the model's device (the CPU for a
    model without parameters). ``cpu_or_cuda_only`` refuses the framework's other device types.
    Anything the framework cannot use is a ValueError saying what to pass; a device this machine
    lacks is a DeviceUnavailableError (a ValueError)."""
    if device is None:
        first = next(model.parameters(), None) if model is not None else None
        return first.device if first is not None else device_class("cpu")
    if isinstance(device, device_class):
        parsed = device
    elif isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise ValueError(f"device={device} is not a GPU index; pass 'cpu', 'cuda:N' or a device list.")
        parsed = device_class("cuda", device)
    elif isinstance(device, str):
        try:
            parsed = device_class(device)
        except name_errors as error:
            raise ValueError(f"device={device!r} is not a {framework} device; use 'cpu', 'cuda' or 'cuda:N'.") \
                from error
    else:
        raise ValueError(f"device must be a str, int, {framework}.device or None, got {type(device).__name__}.")
    if parsed.type == "cuda":
        if not cuda.is_available():
            raise DeviceUnavailableError(f"device={device!r} needs CUDA, which this {framework} cannot use (a CPU "
                                         "build, or no GPU); pass device='cpu'.")
        if parsed.index is None:
            parsed = device_class("cuda", cuda.current_device())
        if parsed.index >= cuda.device_count():
            raise DeviceUnavailableError(f"device={device!r}: only {cuda.device_count()} CUDA device(s) are visible.")
    elif cpu_or_cuda_only and parsed.type != "cpu":
        raise ValueError(f"device={device!r}: the {framework} driver trains on 'cpu' or 'cuda:N'.")
    return parsed
