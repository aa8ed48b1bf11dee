"""oneflow's side of the neutral weights format (:mod:`fastcore_train.convert`).

oneflow follows torch: the same layer names, layouts (Linear ``[out, in]``) and gate orders.
Optimizer states: SGD's ``momentum_buf``, Adam's ``exp_avg``/``exp_avg_sq`` per parameter and one
``step`` count for the optimizer (torch keeps one per parameter).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import oneflow as flow

from fastcore_train.backends.oneflow.persistence import OneflowPersistence, load_file
from fastcore_train.convert.layout import find_layer, torch_style_rnn_info, torch_style_specs
from fastcore_train.convert.optimizer_state import (NeutralOptimizer, converted_indexed_state, indexed_state,
                                                    read_indexed_states)
from fastcore_train.drivers.persistence import training_state_layout

#: The model file name's suffix in a checkpoint.
MODEL_SUFFIX = OneflowPersistence.model_file_suffix
_nn = flow.nn
LAYERS = ((_nn.Linear, "linear"), (_nn.Conv1d, "conv1d"), (_nn.Conv2d, "conv2d"), (_nn.Embedding, "embedding"),
          (_nn.LayerNorm, "layer_norm"), (_nn.BatchNorm1d, "batch_norm"), (_nn.BatchNorm2d, "batch_norm"),
          (_nn.LSTM, "lstm"), (_nn.GRU, "gru"))
OPTIMIZERS = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}
OPTIMIZER_CLASSES = {"sgd": "oneflow.nn.optimizer.sgd.SGD", "adam": "oneflow.nn.optimizer.adam.Adam",
                     "adamw": "oneflow.nn.optimizer.adamw.AdamW"}
#: neutral slot -> oneflow state name
SLOTS = {"momentum_buffer": "momentum_buf", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}


def layer_kind(module: Any) -> Optional[tuple[str, dict[str, Any]]]:
    """``(kind, info)`` of a standard layer, None for any other module."""
    return find_layer(module, LAYERS, torch_style_rnn_info)


#: the tensors of each layer kind: named and laid out as torch does
tensor_specs = torch_style_specs


def to_numpy(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy()


from_numpy = flow.tensor
load = load_file


def save(obj: Any, path: Path) -> None:
    flow.save(obj, str(path))


def _step(state: dict[str, Any]) -> Optional[int]:
    step = state["state"].get("step")
    return None if step is None else int(step)


def read_optimizers(path: Path, classes: list[str]) -> list[NeutralOptimizer]:
    """The optimizers of a oneflow training-state file, by index of parameter."""
    return read_indexed_states(load_file(path)["optimizers"], classes, OPTIMIZERS, SLOTS, to_numpy, _step)


def write_optimizers(optimizers: list[NeutralOptimizer], path: Path, shapes: list[tuple[int, ...]]) -> None:
    """A oneflow training-state file; the hyperparameters (param_groups) are taken from the
    optimizer the state is loaded into (see ``persistence.py``)."""
    states = []
    for optimizer in optimizers:
        state = indexed_state(optimizer, "oneflow", SLOTS, flow.tensor)
        state["step"] = int(optimizer.step or 0)  # oneflow counts steps for every optimizer
        states.append(converted_indexed_state(state))
    save(training_state_layout(states), path)


def optimizer_class(optimizer: NeutralOptimizer) -> str:
    return OPTIMIZER_CLASSES[optimizer.kind]
