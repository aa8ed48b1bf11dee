"""Sorting the Trainer's/Evaluator's ``**kwargs`` into driver options and the rest.

Driver options are the common ones and whatever keyword each registered backend declares it
owns (see :mod:`fastcore_train.drivers.registry`); this module names no backend.

fastNLP 1.0 accepted any keyword silently, so a typo did nothing; here an unknown keyword is an
error that lists what is accepted.
"""
from __future__ import annotations

from typing import Any, Iterable

from fastcore_train.drivers.registry import all_driver_kwargs


def split_backend_kwargs(kwargs: dict[str, Any], allowed: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return ``(driver_kwargs, options)``; raise TypeError for a keyword that is neither."""
    allowed = set(allowed)
    driver_keywords = set(all_driver_kwargs())  # the common ones and every registered backend's
    driver_kwargs: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in driver_keywords:
            driver_kwargs[key] = value
        elif key in allowed:
            options[key] = value
        else:
            raise TypeError(
                f"Unexpected keyword argument {key!r}. Accepted extra keywords: "
                f"{', '.join(sorted(allowed | driver_keywords))}."
            )
    return driver_kwargs, options
