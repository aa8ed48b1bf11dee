"""``seed_everything``: one call that seeds python, numpy and every framework already imported."""
from __future__ import annotations

import random
import sys

import numpy as np

from fastcore_train.drivers.registry import all_backends, load_backend


def seed_everything(seed: int) -> int:
    """Seed python's ``random``, numpy's global generator and each loaded framework's generators.

    Frameworks not yet imported are left alone (seeding would import them); call this after
    importing the framework your model uses. Returns ``seed``.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an int in [0, 2**32), got {seed!r}.")
    random.seed(seed)
    np.random.seed(seed)
    for entry in all_backends():
        if entry.framework_module in sys.modules:
            load_backend(entry).seed_framework(seed)
    return seed
