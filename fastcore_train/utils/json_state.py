"""Callback states as JSON: checked and encoded when a checkpoint is saved, decoded when loaded.

JSON keeps a checkpoint free of code (loading it only parses text) and readable in an editor.
Allowed: dicts with string keys, lists and tuples (read back as lists), strings, numbers,
booleans, None, numpy scalars (read back as python numbers) and numpy arrays, which are written
as ``{"__ndarray__": [...], "dtype": "float32", "shape": [...]}`` and read back as arrays.
Anything else is a :class:`StateNotJSONError` naming where it is, raised before anything is written.
"""
from __future__ import annotations

from typing import Any

ARRAY_KEY = "__ndarray__"


class StateNotJSONError(TypeError):
    """A state that cannot be written as JSON; the message names the offending entry."""


def _describe(path: str) -> str:
    return f"the entry {path}" if path else "the state itself"


def encode(value: Any, path: str = "") -> Any:
    """``value`` as JSON-able data; ``path`` (e.g. ``['best'][0]``) is where it sits, for errors."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise StateNotJSONError(
                    f"{_describe(path)} has the key {key!r} ({type(key).__name__}); JSON keys are strings, "
                    "so use str keys (and convert them back in on_load_checkpoint).")
            if key == ARRAY_KEY:
                raise StateNotJSONError(f"{_describe(path)} uses the reserved key {ARRAY_KEY!r}; rename it.")
            out[key] = encode(item, f"{path}[{key!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [encode(item, f"{path}[{index}]") for index, item in enumerate(value)]
    kind = type(value)
    if kind.__module__ == "numpy":  # without importing numpy: states holding none never need it
        import numpy as np

        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            return value.item()
        if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            return {ARRAY_KEY: value.tolist(), "dtype": value.dtype.str, "shape": list(value.shape)}
    raise StateNotJSONError(
        f"{_describe(path)} is a {kind.__module__}.{kind.__qualname__}, which cannot be written as JSON. "
        "Return plain data (dicts with str keys, lists, numbers, strings, booleans, None, numpy arrays) "
        "and rebuild other objects in on_load_checkpoint.")


def decode(value: Any) -> Any:
    """What :func:`encode` wrote, with numpy arrays rebuilt."""
    if isinstance(value, dict):
        if ARRAY_KEY in value:
            import numpy as np

            return np.asarray(value[ARRAY_KEY], dtype=np.dtype(value["dtype"])).reshape(value["shape"])
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value
