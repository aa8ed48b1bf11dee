"""Numpy arrays in batches: found anywhere in the nesting, made tensors by the backend's call,
strings left alone, read-only arrays copied before a framework could share their memory."""
from __future__ import annotations

import numpy as np

from fastcore_train.utils.arrays import holds_arrays, map_tensors_and_arrays


class Box:
    """A stand-in tensor type: what the walk does with a backend's tensors, without a framework."""

    def __init__(self, array: np.ndarray, where: str = "host") -> None:
        self.array, self.where = array, where


def test_holds_arrays_looks_through_every_container():
    assert holds_arrays({"a": [1, (2, {"b": np.zeros(2)})]})
    assert holds_arrays(np.zeros(()))
    assert not holds_arrays({"a": [1, 2.0, "x", (None,)], "b": np.float32(1.0)})  # numpy scalars are not arrays


def test_numeric_arrays_become_tensors_and_tensors_move():
    seen = []

    def from_numpy(array):
        seen.append(array)
        return Box(array, "device")

    read_only = np.arange(3)
    read_only.setflags(write=False)
    text = np.array(["a", "b"])
    batch = {"x": np.ones((2, 2), np.float32), "mask": np.array([True, False]), "text": text,
             "nested": [read_only, Box(np.zeros(1))], "n": 3}
    out = map_tensors_and_arrays(batch, Box, from_numpy, lambda box: Box(box.array, "device"))

    assert out["x"].where == "device" and out["x"].array is batch["x"]  # writable: shared, not copied
    assert out["mask"].where == "device"
    assert out["text"] is text  # strings are not numbers: passed on
    assert out["n"] == 3
    copied, moved = out["nested"]
    assert copied.where == "device" and copied.array.flags.writeable and copied.array is not read_only
    np.testing.assert_array_equal(copied.array, read_only)
    assert moved.where == "device"
    assert len(seen) == 3
