"""One rank's random state in a compact binary file that loading cannot turn into code.

A rank's RNG state is mostly long lists of integers (python's and numpy's Mersenne Twister words,
torch's generator bytes): ~34 KB as compact JSON, ~53 KB indented. Here each such list becomes a
numpy array of the narrowest unsigned type that holds it, stored in an ``.npz`` next to the rest of
the structure (as JSON): about 10 KB a rank, read with ``allow_pickle=False``. Each rank writes its
own file, so a checkpoint's rank-0 files keep the same size at any world size.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, BinaryIO, Union

import numpy as np

_SKELETON = "__skeleton__"
_ARRAY_REF = "__array__"
_MIN_PACKED = 16  # shorter lists stay in the JSON skeleton


def _narrowest(values: list[int]) -> np.dtype:
    low, high = min(values), max(values)
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        if low >= 0 and high <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def _pack(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, dict):
        return {str(key): _pack(item, arrays) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        if len(value) >= _MIN_PACKED and all(type(item) is int for item in value):
            if min(value) >= np.iinfo(np.int64).min and max(value) <= np.iinfo(np.uint64).max:
                name = f"a{len(arrays)}"
                arrays[name] = np.asarray(value, dtype=_narrowest(list(value)))
                return {_ARRAY_REF: name}
        return [_pack(item, arrays) for item in value]
    if isinstance(value, bytes):
        name = f"a{len(arrays)}"
        arrays[name] = np.frombuffer(value, dtype=np.uint8).copy()
        return {_ARRAY_REF: name, "bytes": True}
    if isinstance(value, np.ndarray):  # read back as lists, as the JSON states before format 3 were
        return _pack(value.tolist(), arrays)
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"A rank state holds a {type(value).__name__}, which it cannot store; RNG states are "
                    "dicts, lists, numbers, strings and bytes.")


def _unpack(value: Any, arrays: Any) -> Any:
    if isinstance(value, dict):
        if _ARRAY_REF in value:
            array = arrays[value[_ARRAY_REF]]
            if value.get("bytes"):
                return array.tobytes()
            return array.tolist()
        return {key: _unpack(item, arrays) for key, item in value.items()}
    if isinstance(value, list):
        return [_unpack(item, arrays) for item in value]
    return value


def write_rank_state(target: Union[Path, BinaryIO], state: Any) -> None:
    """Write ``state`` (dicts, lists, tuples, numbers, strings, bytes, numpy arrays) to ``target``
    (a path or a binary file); a checkpoint's files are fsynced together once it is published."""
    arrays: dict[str, np.ndarray] = {}
    skeleton = json.dumps(_pack(state, arrays), separators=(",", ":"))
    arrays[_SKELETON] = np.frombuffer(skeleton.encode("utf-8"), dtype=np.uint8)
    if isinstance(target, (str, os.PathLike)):
        with open(target, "wb") as handle:
            np.savez(handle, **arrays)
    else:
        np.savez(target, **arrays)


def read_rank_state(path: Path) -> Any:
    """What :func:`write_rank_state` wrote (tuples and numpy arrays come back as lists, as from JSON)."""
    with np.load(path, allow_pickle=False) as archive:
        skeleton = json.loads(archive[_SKELETON].tobytes().decode("utf-8"))
        return _unpack(skeleton, {name: archive[name] for name in archive.files if name != _SKELETON})
