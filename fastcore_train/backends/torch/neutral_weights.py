"""torch's side of the neutral weights format (:mod:`fastcore_train.convert`): which module is
which standard layer, how torch names their tensors (the neutral names are torch's own), and
reading and writing torch model and optimizer files as numpy arrays."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from fastcore_train.backends.torch.persistence import TorchPersistence, load_file
from fastcore_train.convert.layout import find_layer, torch_style_rnn_info, torch_style_specs
from fastcore_train.convert.optimizer_state import (NeutralOptimizer, converted_indexed_state, indexed_state,
                                                    read_indexed_states)
from fastcore_train.drivers.persistence import training_state_layout

#: The model file name's suffix in a checkpoint.
MODEL_SUFFIX = TorchPersistence.model_file_suffix
_nn = torch.nn
LAYERS = ((_nn.Linear, "linear"), (_nn.Conv1d, "conv1d"), (_nn.Conv2d, "conv2d"), (_nn.Embedding, "embedding"),
          (_nn.LayerNorm, "layer_norm"), (_nn.modules.batchnorm._BatchNorm, "batch_norm"), (_nn.LSTM, "lstm"),
          (_nn.GRU, "gru"))
#: torch optimizer class name -> neutral kind, and back.
OPTIMIZERS = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}
OPTIMIZER_CLASSES = {"sgd": "torch.optim.sgd.SGD", "adam": "torch.optim.adam.Adam", "adamw": "torch.optim.adamw.AdamW"}
#: neutral slot -> torch state name (the neutral names are torch's)
SLOTS = {"momentum_buffer": "momentum_buffer", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}


def layer_kind(module: Any) -> Optional[tuple[str, dict[str, Any]]]:
    """``(kind, info)`` of a standard layer, None for any other module."""
    return find_layer(module, LAYERS, torch_style_rnn_info)


#: the tensors of each layer kind: named and laid out as torch does
tensor_specs = torch_style_specs


def to_numpy(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy()


from_numpy = torch.from_numpy
load = load_file


def save(obj: Any, path: Path) -> None:
    torch.save(obj, str(path))


def _step(state: dict[str, Any]) -> Optional[int]:
    """Adam's step count: torch keeps one per parameter (all equal when every parameter trains)."""
    steps = [int(float(entry["step"])) for entry in state["state"].values() if "step" in entry]
    return max(steps) if steps else None


def read_optimizers(path: Path, classes: list[str]) -> list[NeutralOptimizer]:
    """The optimizers of a torch training-state file, by index of parameter."""
    return read_indexed_states(load_file(path)["optimizers"], classes, OPTIMIZERS, SLOTS, to_numpy, _step)


def write_optimizers(optimizers: list[NeutralOptimizer], path: Path, shapes: list[tuple[int, ...]]) -> None:
    """A torch training-state file; the hyperparameters (param_groups) are taken from the
    optimizer the state is loaded into (see ``persistence.py``)."""
    states = []
    for optimizer in optimizers:
        state = indexed_state(optimizer, "torch", SLOTS, torch.from_numpy)
        if optimizer.kind in ("adam", "adamw"):
            for entry in state.values():
                entry["step"] = torch.tensor(float(optimizer.step or 0))
        states.append(converted_indexed_state(state))
    save(training_state_layout(states), path)


def optimizer_class(optimizer: NeutralOptimizer) -> str:
    return OPTIMIZER_CLASSES[optimizer.kind]
