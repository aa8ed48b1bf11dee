"""Callback states as JSON (fastcore_train/utils/json_state.py and checkpoint.encode_callback_states):
numpy values round-trip, anything else is an error naming the callback and the entry."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fastcore_train.checkpoint import CheckpointError, CheckpointStateError, encode_callback_states
from fastcore_train.utils import json_state


def round_trip(value):
    return json_state.decode(json.loads(json.dumps(json_state.encode(value))))


def test_plain_data_and_numpy_values_round_trip():
    state = {"best": np.float32(0.25), "wait": np.int64(3), "flag": np.bool_(True), "pair": (1, "a"),
             "grid": np.arange(6, dtype=np.int16).reshape(2, 3), "empty": np.zeros((0, 4), dtype=np.float64),
             "none": None, "inf": float("inf")}
    loaded = round_trip(state)
    assert loaded["best"] == 0.25 and loaded["wait"] == 3 and loaded["flag"] is True
    assert loaded["pair"] == [1, "a"] and loaded["none"] is None and loaded["inf"] == float("inf")
    for key in ("grid", "empty"):
        assert loaded[key].dtype == state[key].dtype and loaded[key].shape == state[key].shape
        np.testing.assert_array_equal(loaded[key], state[key])


@pytest.mark.parametrize("state, message", [
    ({"a": {"b": {1, 2}}}, r"the entry \['a'\]\['b'\] is a builtins.set"),
    ({"a": [0, object()]}, r"the entry \['a'\]\[1\] is a builtins.object"),
    ({"a": {2: "x"}}, r"the entry \['a'\] has the key 2 \(int\)"),
    ({"a": np.array(["s"], dtype=object)}, r"the entry \['a'\] is a numpy.ndarray"),
    ({json_state.ARRAY_KEY: 1}, "reserved key"),
    ({1, 2}, "the state itself is a builtins.set"),
])
def test_what_is_not_json_is_named(state, message):
    with pytest.raises(json_state.StateNotJSONError, match=message):
        json_state.encode(state)


def test_a_checkpoint_names_the_callback():
    assert encode_callback_states({"A": {"x": np.float64(1.5)}}) == {"A": {"x": 1.5}}
    with pytest.raises(CheckpointStateError, match=r"callback 'EarlyStop#1' .* the entry \['log'\] is a builtins.set"
                       ) as raised:
        encode_callback_states({"A": {}, "EarlyStop#1": {"log": set()}})
    assert isinstance(raised.value, CheckpointError) and isinstance(raised.value, TypeError)
