"""Keyword-matching dict batches to functions, and input/output mappings."""
from __future__ import annotations

import pytest

from fastcore_train.utils.param_call import ParamBinder, apply_mapping


def forward(x, y, scale=1):
    return (x + y) * scale


def test_binder_passes_only_the_parameters_the_function_takes():
    binder = ParamBinder(forward)
    assert binder({"x": 1, "y": 2, "unused": 9}) == 3
    assert binder({"x": 1, "y": 2, "scale": 10}) == 30


def test_binder_reads_signature_fn_instead_of_a_wrapper():
    def wrapper(*args, **kwargs):
        return forward(*args, **kwargs)

    binder = ParamBinder(wrapper, signature_fn=forward)
    assert binder.names == ("x", "y", "scale")
    assert binder({"x": 1, "y": 1, "extra": 0}) == 2


def test_binder_gives_everything_to_var_keyword():
    binder = ParamBinder(lambda **batch: sorted(batch))
    assert binder({"b": 1, "a": 2}) == ["a", "b"]


def test_missing_parameter_names_it_and_the_available_keys():
    with pytest.raises(ValueError, match=r"needs the parameter\(s\) \['y'\] but the batch only has keys \['x', 'z'\]"):
        ParamBinder(forward)({"x": 1, "z": 2})


def test_call_with_several_sources_and_ambiguity():
    binder = ParamBinder(forward)
    assert binder.call_with({"x": 1}, {"y": 2}) == 3
    with pytest.raises(ValueError, match=r"Ambiguous input.*'x'"):
        binder.call_with({"x": 1}, {"x": 2, "y": 2})
    with pytest.raises(ValueError, match=r"\['y'\]"):
        binder.call_with({"x": 1}, {})


@pytest.mark.parametrize("mapping, data, expected", [
    (None, {"a": 1}, {"a": 1}),
    ({"a": "b"}, {"a": 1, "c": 2}, {"b": 1, "c": 2}),
    ({0: "x", 1: "y"}, (10, 20), {"x": 10, "y": 20}),
    (lambda d: {"sum": d["a"] + d["b"]}, {"a": 1, "b": 2}, {"sum": 3}),
    ({"a": "b"}, 5, 5),
])
def test_apply_mapping(mapping, data, expected):
    assert apply_mapping(mapping, data) == expected


def test_mapping_that_makes_keys_collide_is_an_error():
    with pytest.raises(ValueError, match=r"collide on \['b'\]"):
        apply_mapping({"a": "b"}, {"a": 1, "b": 2})
