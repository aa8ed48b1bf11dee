"""Capturing and restoring python's and numpy's global random states as JSON-able data."""
from __future__ import annotations

import random
from typing import Any

import numpy as np


def get_host_rng_state() -> dict[str, Any]:
    """python ``random`` and numpy's legacy global generator, as plain lists and numbers."""
    version, internal, gauss = random.getstate()
    name, keys, position, has_gauss, cached = np.random.get_state()
    return {"python": [version, list(internal), gauss],
            "numpy": [name, keys.tolist(), int(position), int(has_gauss), float(cached)]}


def set_host_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached))
