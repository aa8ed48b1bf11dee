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


def copy_tensors(data: Any, tensor_type: TensorType, copy: Callable[[Any], Any]) -> Any:
    """A copy of ``data`` whose containers are new and whose tensors are ``copy(tensor)``.

    Unlike :func:`map_tensors` it keeps what a pickle of ``data`` would show: container types and
    their attributes (e.g. the ``_metadata`` of a torch state dict) and sharing (an object met twice,
    such as tied weights, is copied once and appears twice). Used for host snapshots of
    checkpoint state, which training may change while the copy is written.
    """
    import copy as copy_module

    memo: dict[int, Any] = {}

    def walk(value: Any) -> Any:
        known = memo.get(id(value))
        if known is not None:
            return known
        if isinstance(value, tensor_type):
            result = copy(value)
        elif isinstance(value, tuple):
            items = [walk(item) for item in value]
            result = type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        elif isinstance(value, (dict, list)):
            result = copy_module.copy(value)  # same type, same attributes
            for key in (list(result) if isinstance(result, dict) else range(len(result))):
                result[key] = walk(result[key])
        else:
            return value
        memo[id(value)] = result
        return result

    return walk(data)
