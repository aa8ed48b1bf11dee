"""Applying a function to every tensor inside nested containers, without importing any framework.

Batches and model outputs are dicts, lists, tuples and namedtuples of tensors, nested at will.
Walking them is the same for every framework, so it is written once here; a backend only says
what a tensor is (its tensor class) and what to do with one (move it, turn it into numbers).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Union

TensorType = Union[type, tuple[type, ...]]


def map_tensors(data: Any, tensor_type: TensorType, fn: Callable[[Any], Any],
                keep_mapping_type: bool = True) -> Any:
    """``data`` with ``fn(tensor)`` in place of every instance of ``tensor_type`` inside it.

    Dicts (and other mappings), lists, tuples and namedtuples are rebuilt with their contents
    mapped, nested to any depth; every other value is returned as it is. A mapping other than a
    plain dict is rebuilt as its own type when ``keep_mapping_type``, else as a plain dict.
    """
    if isinstance(data, tensor_type):
        return fn(data)
    if isinstance(data, Mapping):
        mapped = {key: map_tensors(value, tensor_type, fn, keep_mapping_type) for key, value in data.items()}
        return type(data)(mapped) if keep_mapping_type and type(data) is not dict else mapped
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(map_tensors(value, tensor_type, fn, keep_mapping_type) for value in data))
    if isinstance(data, (list, tuple)):
        return type(data)(map_tensors(value, tensor_type, fn, keep_mapping_type) for value in data)
    return data
