"""A model's weights to and from the neutral weights file, and the layout record checkpoints keep.

The framework part is the model's backend's ``neutral_weights`` module, reached through the
registry (:func:`~fastcore_train.drivers.registry.backend_part`); the mapping is done here once.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from fastcore_train.convert.layout import Layout, TensorSpec, UnmappableLayerError, layout_tensors, model_layout
from fastcore_train.convert.neutral_file import neutral_file_layout, read_neutral_file, write_neutral_file
from fastcore_train.drivers.registry import backend_for_model, backend_part

#: The ``meta.json`` key holding the model's layout (or why it has none).
LAYERS_KEY = "layers"

Specs = Callable[[str, dict[str, Any]], list[TensorSpec]]


def layout_of(model: Any) -> Layout:
    """The model's layout (:mod:`~fastcore_train.convert.layout`); an
    :class:`~fastcore_train.convert.layout.UnmappableLayerError` names the first tensor outside it."""
    part = backend_part(model, "neutral_weights")
    return model_layout(model, part.layer_kind, part.tensor_specs)


def layout_record(model: Any) -> Optional[dict[str, Any]]:
    """What a checkpoint's ``meta.json`` keeps under ``"layers"``: the layout, or the reason the
    model has none (its first unmapped tensor); None for a backend without a neutral mapping."""
    try:
        return {"layout": layout_of(model)}
    except UnmappableLayerError as error:
        return {"unmapped": str(error)}
    except Exception:  # no mapping for this backend (or a model it cannot walk): saving goes on without
        return None


def to_neutral(state: dict[str, np.ndarray], layout: Layout, specs: Specs, where: str) -> dict[str, np.ndarray]:
    """A framework state dict (numpy) under neutral names and layouts."""
    neutral = {}
    for name, neutral_name, spec in layout_tensors(layout, specs):
        if spec.alias_of is not None:
            continue
        if name not in state:
            if spec.optional:
                continue
            raise ValueError(f"{where} has no tensor {name!r}, which its recorded layout says it holds; it is damaged.")
        value = np.asarray(state[name])
        neutral[neutral_name] = value.T if spec.transpose else value
    return neutral


def from_neutral(neutral: dict[str, np.ndarray], layout: Layout, specs: Specs, framework: str) -> dict[str, np.ndarray]:
    """Neutral tensors as ``framework`` names and lays them out (a tensor it has no place for, such
    as torch's batch count for paddle, is left out; one it needs and the source lacked is zero)."""
    state = {}
    for name, neutral_name, spec in layout_tensors(layout, specs):
        if neutral_name not in neutral:
            if spec.optional:
                state[name] = np.zeros((), dtype=np.int64)  # torch's num_batches_tracked, unknown elsewhere
                continue
            raise ValueError(f"The neutral weights have no {neutral_name!r}, which {framework} needs for {name!r}.")
        value = neutral[neutral_name]
        state[name] = np.ascontiguousarray(value.T) if spec.transpose else value
    return state


def read_model_file(part: Any, path: Path) -> dict[str, np.ndarray]:
    """A model file of ``part``'s framework (its ``load``) as numpy arrays (its ``to_numpy``)."""
    state = part.load(path)
    if not isinstance(state, dict):
        raise ValueError(f"{str(path)!r} holds a {type(state).__name__}, not a state dict.")
    return {name: part.to_numpy(value) for name, value in state.items()}


def write_model_file(part: Any, state: dict[str, np.ndarray], path: Path) -> None:
    """Write numpy arrays as ``part``'s framework's tensors (its ``from_numpy`` and ``save``)."""
    part.save({name: part.from_numpy(np.array(value)) for name, value in state.items()}, path)


def model_state(part: Any, model: Any) -> dict[str, np.ndarray]:
    return {name: part.to_numpy(value) for name, value in model.state_dict().items()}


def load_model_state(part: Any, model: Any, state: dict[str, np.ndarray]) -> None:
    """Load numpy arrays into ``model``: ``part.load_state(model, tensors)`` where the framework
    spells it otherwise, else ``model.load_state_dict``."""
    tensors = {name: part.from_numpy(np.array(value)) for name, value in state.items()}
    (getattr(part, "load_state", None) or type(model).load_state_dict)(model, tensors)


def save_neutral_weights(model: Any, path: os.PathLike) -> Path:
    """Write ``model``'s parameters and buffers to ``path`` in the neutral weights format
    (safetensors, torch's names and layouts). Raises
    :class:`~fastcore_train.convert.layout.UnmappableLayerError` before writing anything when a
    layer cannot be mapped."""
    part = backend_part(model, "neutral_weights")
    layout = layout_of(model)
    neutral = to_neutral(model_state(part, model), layout, part.tensor_specs, type(model).__name__)
    return write_neutral_file(path, neutral, layout, source=backend_for_model(model).name)


def load_neutral_weights(model: Any, path: os.PathLike) -> None:
    """Load a neutral weights file into ``model`` (any framework's, with the same structure as the
    model that wrote it)."""
    part = backend_part(model, "neutral_weights")
    saved_layout = neutral_file_layout(path)  # from the header: a wrong model is said before any tensor is read
    layout = layout_of(model)
    if [row[:2] for row in layout] != [row[:2] for row in saved_layout]:
        raise ValueError(f"{str(path)!r} holds the weights of a model with layers {saved_layout}, but this "
                         f"{type(model).__name__} has {layout}; load it into a model of the same structure.")
    neutral, _ = read_neutral_file(path)
    load_model_state(part, model, from_neutral(neutral, layout, part.tensor_specs, backend_for_model(model).name))
