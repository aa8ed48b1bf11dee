"""Sorting the Trainer's/Evaluator's ``**kwargs`` into per-backend driver options and the rest.

fastNLP 1.0 accepted any keyword silently, so a typo did nothing; here an unknown keyword is an
error that lists what is accepted.
"""
from __future__ import annotations

from typing import Any, Iterable

#: Keyword arguments handed to the driver untouched; each backend reads the one it owns.
DRIVER_KWARGS = ("torch_kwargs", "paddle_kwargs", "jittor_kwargs", "oneflow_kwargs",
                 "fairscale_kwargs", "deepspeed_kwargs", "torch_fsdp_kwargs", "data_device",
                 "output_from_new_proc")


def split_backend_kwargs(kwargs: dict[str, Any], allowed: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return ``(driver_kwargs, options)``; raise TypeError for a keyword that is neither."""
    allowed = set(allowed)
    driver_kwargs: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in DRIVER_KWARGS:
            driver_kwargs[key] = value
        elif key in allowed:
            options[key] = value
        else:
            raise TypeError(
                f"Unexpected keyword argument {key!r}. Accepted extra keywords: "
                f"{', '.join(sorted(allowed | set(DRIVER_KWARGS)))}."
            )
    return driver_kwargs, options
