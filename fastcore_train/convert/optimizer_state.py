"""Optimizer state in neutral terms: SGD's momentum buffer, Adam's and AdamW's two moments and
step count, per parameter.

A backend reads its framework's training-state file into :class:`NeutralOptimizer` objects keyed
by parameter *index* (the position in ``model.parameters()``, in that framework's layout) and
writes them back; :func:`to_neutral`/:func:`from_neutral` re-key them by neutral parameter name and
transpose what the framework stores transposed. Hyperparameters (learning rate, betas, weight
decay) are not moved: the resumed run's optimizer keeps those it was built with (the learning
rate's schedule position moves with the scheduler, see ``checkpoint.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Optional

import numpy as np

from fastcore_train.convert.layout import Layout, TensorSpec, layout_tensors

#: The neutral state names per kind (torch's).
SLOTS = {"sgd": ("momentum_buffer",), "adam": ("exp_avg", "exp_avg_sq"), "adamw": ("exp_avg", "exp_avg_sq")}
#: Marks an optimizer state written by the converter: hyperparameters come from the loading optimizer.
CONVERTED_KEY = "fastcore_train_converted"


class UnconvertibleOptimizerError(TypeError):
    """An optimizer whose state the converter cannot move."""


@dataclass
class NeutralOptimizer:
    """One optimizer's state. ``kind``: ``sgd``, ``adam`` or ``adamw``; ``slots``: per parameter
    (an index, or a neutral name after :func:`to_neutral`) its arrays under :data:`SLOTS` names;
    ``step``: optimizer steps taken (Adam's bias correction; SGD's where the framework counts
    them, as oneflow does), None where unknown."""

    kind: Optional[str]
    class_name: str
    slots: dict[Any, dict[str, np.ndarray]] = field(default_factory=dict)
    step: Optional[int] = None


def check_slots(optimizer: NeutralOptimizer, framework: str) -> None:
    """An error when ``optimizer`` is of a kind the converter cannot move."""
    if optimizer.kind not in SLOTS:
        raise UnconvertibleOptimizerError(
            f"Cannot convert the state of a {optimizer.class_name} optimizer to {framework}: the converter moves "
            f"SGD (with or without momentum), Adam and AdamW. Convert the weights only (convert_checkpoint(..., "
            "weights_only=True)) and start the optimizer afresh.")


def _transposed(layout: Layout, specs: Callable[[str, dict[str, Any]], list[TensorSpec]]) -> dict[str, bool]:
    return {neutral: spec.transpose for _, neutral, spec in layout_tensors(layout, specs)}


def to_neutral(optimizer: NeutralOptimizer, order: list[str], layout: Layout,
               specs: Callable[[str, dict[str, Any]], list[TensorSpec]]) -> NeutralOptimizer:
    """Re-key ``optimizer``'s slots from parameter index to neutral name (``order``: neutral names
    in parameter order), undoing the source framework's transposes."""
    check_slots(optimizer, "the neutral format")
    transposed = _transposed(layout, specs)
    slots = {}
    for index, arrays in optimizer.slots.items():
        if not 0 <= index < len(order):
            raise UnconvertibleOptimizerError(
                f"The {optimizer.class_name} state has parameter #{index}, but the model has {len(order)} mapped "
                "parameters: the optimizer was not built over model.parameters(), which the converter needs.")
        name = order[index]
        if not arrays:
            continue  # a buffer the framework lists among parameters (jittor): it has no state
        slots[name] = {key: value.T if transposed[name] else value for key, value in arrays.items()}
    return replace(optimizer, slots=slots)


def from_neutral(optimizer: NeutralOptimizer, order: list[str], layout: Layout,
                 specs: Callable[[str, dict[str, Any]], list[TensorSpec]]) -> NeutralOptimizer:
    """The inverse of :func:`to_neutral` for the target framework's layout and order."""
    transposed = _transposed(layout, specs)
    position = {name: index for index, name in enumerate(order)}
    slots = {position[name]: {key: value.T if transposed[name] else value for key, value in arrays.items()}
             for name, arrays in optimizer.slots.items()}
    return replace(optimizer, slots=dict(sorted(slots.items())))


def saved_optimizers(saved: list[dict[str, Any]], classes: list[str],
                     kinds: dict[str, str]) -> Iterator[tuple[str, Optional[str], dict[str, Any]]]:
    """``(class name, neutral kind, saved state)`` of each optimizer of a training-state file
    (``kinds``: the backend's class name -> neutral kind; None for a class it does not map)."""
    for class_name, state in zip(classes, saved):
        yield class_name, kinds.get(class_name.rsplit(".", 1)[-1]), state


def read_indexed_states(saved: list[dict[str, Any]], classes: list[str], kinds: dict[str, str],
                        slot_names: dict[str, str], to_numpy: Callable[[Any], np.ndarray],
                        step: Callable[[dict[str, Any]], Optional[int]]) -> list[NeutralOptimizer]:
    """:class:`NeutralOptimizer` objects from torch-style optimizer states (``{"state": {index:
    {name: tensor}}}``, torch and oneflow): ``kinds`` maps class names to neutral kinds,
    ``slot_names`` neutral slot names to the framework's, ``step(state)`` reads the step count."""
    result = []
    for class_name, kind, state in saved_optimizers(saved, classes, kinds):
        slots = {int(index): {neutral: to_numpy(entry[name]) for neutral, name in slot_names.items()
                              if entry.get(name) is not None}
                 for index, entry in state["state"].items() if isinstance(entry, dict)}
        result.append(NeutralOptimizer(kind=kind, class_name=class_name, slots=slots,
                                       step=step(state)))
    return result


def indexed_state(optimizer: NeutralOptimizer, framework: str, slot_names: dict[str, str],
                  to_tensor: Callable[[np.ndarray], Any]) -> dict[Any, Any]:
    """The torch-style ``{index: {name: tensor}}`` state of ``optimizer`` (torch and oneflow)."""
    check_slots(optimizer, framework)
    return {index: {slot_names[neutral]: to_tensor(np.array(value)) for neutral, value in slots.items()}
            for index, slots in optimizer.slots.items()}


def converted_indexed_states(optimizers: list[NeutralOptimizer], framework: str, slot_names: dict[str, str],
                             to_tensor: Callable[[np.ndarray], Any],
                             add_step: Callable[[dict[Any, Any], NeutralOptimizer], None]) -> list[dict[str, Any]]:
    """The optimizer entries of a converted torch-style training state (torch and oneflow), one
    per optimizer: :func:`indexed_state`, then ``add_step(state, optimizer)`` records the step
    count where the framework keeps it, then :func:`converted_indexed_state`."""
    states = []
    for optimizer in optimizers:
        state = indexed_state(optimizer, framework, slot_names, to_tensor)
        add_step(state, optimizer)
        states.append(converted_indexed_state(state))
    return states


def converted_indexed_state(state: dict[Any, Any]) -> dict[str, Any]:
    """An optimizer entry of a converted torch-style training state (:func:`indexed_state`'s
    ``state``): no hyperparameters, which come from the optimizer it is loaded into."""
    return {"state": state, "param_groups": None, CONVERTED_KEY: True}
