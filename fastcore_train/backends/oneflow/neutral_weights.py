"""oneflow's side of the neutral weights format (:mod:`fastcore_train.convert`).

oneflow follows torch: the same layer names, layouts (Linear ``[out, in]``) and gate orders.
Optimizer states: SGD's ``momentum_buf``, Adam's ``exp_avg``/``exp_avg_sq`` per parameter and one
``step`` count for the optimizer (torch keeps one per parameter).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import oneflow as flow

from fastcore_train.backends.oneflow.persistence import OneflowPersistence, load_file
from fastcore_train.convert.layout import (TORCH_STYLE_OPTIMIZERS, detached_numpy, torch_style_layer_kind,
                                          torch_style_layers, torch_style_specs)
from fastcore_train.convert.optimizer_state import (NeutralOptimizer, converted_indexed_states,
                                                    read_indexed_states)
from fastcore_train.drivers.persistence import training_state_layout

#: The model file name's suffix in a checkpoint.
MODEL_SUFFIX = OneflowPersistence.model_file_suffix
#: oneflow's own calls: tensors from numpy, its files read (safely) and written.
from_numpy = flow.tensor
load = load_file


def save(obj: Any, path: Path) -> None:
    flow.save(obj, str(path))


LAYERS = torch_style_layers(flow.nn, (flow.nn.BatchNorm1d, flow.nn.BatchNorm2d))
OPTIMIZERS = TORCH_STYLE_OPTIMIZERS
OPTIMIZER_CLASSES = {"sgd": "oneflow.nn.optimizer.sgd.SGD", "adam": "oneflow.nn.optimizer.adam.Adam",
                     "adamw": "oneflow.nn.optimizer.adamw.AdamW"}
#: neutral slot -> oneflow state name
SLOTS = {"momentum_buffer": "momentum_buf", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}


#: ``(kind, info)`` of a standard layer, None for any other module.
layer_kind = torch_style_layer_kind(LAYERS)
#: the tensors of each layer kind: named and laid out as torch does
tensor_specs = torch_style_specs
to_numpy = detached_numpy
def _step(state: dict[str, Any]) -> Optional[int]:
    step = state["state"].get("step")
    return None if step is None else int(step)


def read_optimizers(path: Path, classes: list[str]) -> list[NeutralOptimizer]:
    """The optimizers of a oneflow training-state file, by index of parameter."""
    return read_indexed_states(load_file(path)["optimizers"], classes, OPTIMIZERS, SLOTS, to_numpy, _step)


def _add_step(state: dict[Any, Any], optimizer: NeutralOptimizer) -> None:
    state["step"] = int(optimizer.step or 0)  # oneflow counts steps for every optimizer


def write_optimizers(optimizers: list[NeutralOptimizer], path: Path, shapes: list[tuple[int, ...]]) -> None:
    """A oneflow training-state file; the hyperparameters (param_groups) are taken from the
    optimizer the state is loaded into (see ``persistence.py``)."""
    save(training_state_layout(converted_indexed_states(optimizers, "oneflow", SLOTS, flow.tensor, _add_step)), path)


def optimizer_class(optimizer: NeutralOptimizer) -> str:
    return OPTIMIZER_CLASSES[optimizer.kind]
