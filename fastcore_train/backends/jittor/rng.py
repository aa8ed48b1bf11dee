"""Jittor's random stream as JSON-able data.

Jittor's generator (a C++ ``std::default_random_engine``) exposes its seed (``jt.get_seed()``)
but not how far it has advanced, so its state cannot be read back. The driver therefore reseeds
it before every training step with a seed derived from ``(base seed, rank, step)``; the state is
then just those numbers, and a restored run draws exactly what the uninterrupted run drew.
Jittor is lazy: pending random ops are executed (``jt.sync_all``) before any reseeding, so they
draw from the stream they were built under.
"""
from __future__ import annotations

from typing import Any

import jittor as jt
import numpy as np

_SEED_MASK = 0x7FFFFFFF  # jt.set_seed takes a C int


def _step_seed(base: int, rank: int, step: int) -> int:
    return int(np.random.SeedSequence([base & 0xFFFFFFFF, rank, step]).generate_state(1)[0]) & _SEED_MASK


class StepSeeder:
    """Reseeds jittor before each training step; its state is ``{"base", "rank", "step"}``."""

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.base = int(jt.get_seed())
        self.step = 0
        self._last_set: int | None = None

    def _adopt_user_seed(self) -> None:
        """A seed set since our last reseed (``jt.set_seed``, ``seed_everything``) starts a new stream."""
        current = int(jt.get_seed())
        if current != self._last_set and current != self.base:
            self.base, self.step = current, 0

    def before_step(self) -> None:
        jt.sync_all()
        self._adopt_user_seed()
        seed = _step_seed(self.base, self.rank, self.step)
        jt.set_seed(seed)
        self._last_set = seed
        self.step += 1

    def state(self) -> dict[str, Any]:
        self._adopt_user_seed()
        return {"base": self.base, "rank": self.rank, "step": self.step}

    def load(self, state: dict[str, Any]) -> None:
        jt.sync_all()
        self.base, self.step = int(state["base"]), int(state["step"])
        jt.set_seed(self.base)  # what the next step reseeds from; also ends any stream in progress
        self._last_set = None
