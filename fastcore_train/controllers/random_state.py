"""The Trainer's random streams (python, numpy and the framework's), read and restored as one.

Checkpoints carry them so that a resumed run draws the same numbers as an uninterrupted one,
and evaluation runs inside :meth:`RandomStateMixin._rng_preserved` so it never shifts them.
"""
from __future__ import annotations

import contextlib
import zlib
from typing import Any, Iterator

import numpy as np

from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.registry import get_backend, load_backend
from fastcore_train.utils.rng import get_host_rng_state, set_host_rng_state


class RandomStateMixin:
    """Mixin for the :class:`~fastcore_train.controllers.trainer.Trainer`: this rank's RNG states."""

    driver: Driver

    def _get_rng_state(self) -> dict[str, Any]:
        return {**get_host_rng_state(), "framework": self.driver.io.rng_state()}

    def _set_rng_state(self, state: dict[str, Any]) -> None:
        set_host_rng_state(state)
        if state.get("framework") is None:  # a checkpoint converted from another framework
            self._reseed_framework()
            return
        self.driver.io.load_rng_state(state["framework"])

    def _reseed_framework(self) -> None:
        """Seed the framework from numpy's (just restored) state: a converted checkpoint cannot
        carry another framework's generators, and this makes every resume of it draw alike."""
        seed = zlib.crc32(np.random.get_state()[1].tobytes())
        load_backend(get_backend(self.driver.backend)).seed_framework(seed)

    @contextlib.contextmanager
    def _rng_preserved(self) -> Iterator[None]:
        """Evaluation must not shift training's random streams (else resumes would diverge)."""
        saved = self._get_rng_state()
        try:
            yield
        finally:
            self._set_rng_state(saved)
