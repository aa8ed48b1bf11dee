"""fastNLP 1.0's driver method names, answered by the driver's parts.

fastNLP scripts call ``trainer.driver.barrier()``, ``driver.get_local_rank()``,
``driver.tensor_to_numeric(x)`` and the like. Here those jobs live on the driver's parts
(``driver.comm``, ``driver.data``, ``driver.io``, ``driver.precision``); :func:`resolve` maps each
old name to its new home so a ported script keeps working, with one FutureWarning per name that
says what to write instead. The names are not Driver members (they do not appear in ``dir()``).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

# old name -> (path from the driver, how to read it: "attr" as is, "call" a value turned into a method)
FASTNLP_NAMES: dict[str, tuple[str, str]] = {
    "get_local_rank": ("comm.local_rank", "call"),
    "barrier": ("comm.barrier", "attr"),
    "is_distributed": ("comm.is_distributed", "attr"),
    "is_global_zero": ("comm.is_global_zero", "attr"),
    "broadcast_object": ("comm.broadcast_object", "attr"),
    "all_gather": ("comm.all_gather_object", "attr"),
    "all_gather_object": ("comm.all_gather_object", "attr"),
    "world_size": ("comm.world_size", "attr"),
    "global_rank": ("comm.rank", "attr"),
    "local_rank": ("comm.local_rank", "attr"),
    "tensor_to_numeric": ("data.to_numeric", "attr"),
    "move_data_to_device": ("data.move", "attr"),
    "set_sampler_epoch": ("data.set_epoch", "attr"),
    "data_device": ("data.device", "attr"),
    "non_blocking": ("data.non_blocking", "attr"),
    "model_device": ("device", "attr"),
    "save_model": ("io.save_model", "attr"),
    "load_model": ("io.load_model", "attr"),
    "get_model_no_sync_context": ("no_sync", "attr"),
    "get_evaluate_context": ("evaluate_context", "attr"),
    "auto_cast": ("precision.forward_context", "attr"),
}
_warned: set[str] = set()


def resolve(driver: Any, name: str) -> Any:
    """What ``driver.<name>`` meant in fastNLP 1.0; AttributeError for any other name."""
    if name not in FASTNLP_NAMES:
        raise AttributeError(f"{type(driver).__name__!r} object has no attribute {name!r}")
    path, kind = FASTNLP_NAMES[name]
    if name not in _warned:
        _warned.add(name)
        new = f"driver.{path}" + ("" if kind == "attr" else " (a property)")
        warnings.warn(f"driver.{name} is fastNLP 1.0's name; use {new}.", FutureWarning, stacklevel=3)
    value: Any = driver
    for part in path.split("."):
        value = getattr(value, part)
    if kind == "call":
        return _returning(value)
    return value


def _returning(value: Any) -> Callable[[], Any]:
    return lambda: value
