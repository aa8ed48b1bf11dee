"""Paddle's random generators (CPU, and each GPU's) as JSON-able data, and back.

A ``GeneratorState`` pickles as a tuple of numbers and a list of ints (its engine's state), which
is plain data; restoring rebuilds the object the way pickle does.
"""
from __future__ import annotations

from typing import Any

import paddle

from fastcore_train.backends.paddle.devices import gpu_count


def _encode(state: Any) -> list[Any]:
    return list(state.__getstate__())


def _decode(data: list[Any], like: Any) -> Any:
    cls = type(like)
    state = cls.__new__(cls)
    state.__setstate__(tuple(data))
    return state


def get_rng_state() -> dict[str, Any]:
    """The CPU generator's state, plus every GPU's when this paddle sees GPUs."""
    state: dict[str, Any] = {"cpu": [_encode(s) for s in paddle.get_rng_state("cpu")]}
    if gpu_count():
        state["gpu"] = [_encode(s) for s in paddle.get_cuda_rng_state()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`get_rng_state` returned (GPU states only where GPUs are visible)."""
    like = paddle.get_rng_state("cpu")[0]
    paddle.set_rng_state([_decode(data, like) for data in state["cpu"]], "cpu")
    if "gpu" in state and gpu_count():
        current = paddle.get_cuda_rng_state()
        paddle.set_cuda_rng_state([_decode(data, like) for data in state["gpu"][:len(current)]])
