"""torch's side of the neutral weights format (:mod:`fastcore_train.convert`): which module is
which standard layer, how torch names their tensors (the neutral names are torch's own), and
reading and writing torch model and optimizer files as numpy arrays."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Optional

import torch

from fastcore_train.backends.torch.persistence import TorchPersistence, check_dcp_metadata, load_file
from fastcore_train.convert.layout import (TORCH_STYLE_OPTIMIZERS, detached_numpy, torch_style_layer_kind,
                                          torch_style_layers, torch_style_specs)
from fastcore_train.convert.optimizer_state import (NeutralOptimizer, converted_indexed_states,
                                                    read_indexed_states)
from fastcore_train.drivers.persistence import training_state_layout

#: The model file name's suffix in a checkpoint.
MODEL_SUFFIX = TorchPersistence.model_file_suffix
LAYERS = torch_style_layers(torch.nn, (torch.nn.modules.batchnorm._BatchNorm,))
OPTIMIZERS = TORCH_STYLE_OPTIMIZERS
OPTIMIZER_CLASSES = {"sgd": "torch.optim.sgd.SGD", "adam": "torch.optim.adam.Adam", "adamw": "torch.optim.adamw.AdamW"}
#: neutral slot -> torch state name (the neutral names are torch's)
SLOTS = {"momentum_buffer": "momentum_buffer", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}


#: ``(kind, info)`` of a standard layer, None for any other module.
layer_kind = torch_style_layer_kind(LAYERS)
#: the tensors of each layer kind: named and laid out as torch does
tensor_specs = torch_style_specs
to_numpy = detached_numpy
from_numpy = torch.from_numpy


def load(path: Path) -> Any:
    """A model or training-state file, or a sharded (``torch.distributed.checkpoint``) folder read whole."""
    return read_sharded_folder(Path(path)) if Path(path).is_dir() else load_file(path)


def read_sharded_folder(folder: Path) -> dict[str, Any]:
    """A DCP folder's full state dict, in this process (its metadata checked before DCP unpickles it)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    check_dcp_metadata(folder)
    with tempfile.TemporaryDirectory() as staging:
        dcp_to_torch_save(folder, Path(staging) / "full.pt")
        return load_file(Path(staging) / "full.pt")


def _indexed(state: dict[str, Any]) -> dict[str, Any]:
    """An optimizer state dict keyed by parameter name (DCP's) keyed by parameter index instead,
    the order of its parameter groups (the optimizer's parameter order)."""
    names = [name for group in state["param_groups"] for name in group["params"]]
    index = {name: i for i, name in enumerate(names)}
    groups = [{**group, "params": [index[name] for name in group["params"]]} for group in state["param_groups"]]
    return {"state": {index[name]: value for name, value in state["state"].items()}, "param_groups": groups}


def save(obj: Any, path: Path) -> None:
    torch.save(obj, str(path))


def _step(state: dict[str, Any]) -> Optional[int]:
    """Adam's step count: torch keeps one per parameter (all equal when every parameter trains)."""
    steps = [int(float(entry["step"])) for entry in state["state"].values() if "step" in entry]
    return max(steps) if steps else None


def read_optimizers(path: Path, classes: list[str]) -> list[NeutralOptimizer]:
    """The optimizers of a torch training-state file, by index of parameter."""
    if Path(path).is_dir():  # a sharded driver's folder: optimizer_<i> keyed by parameter name
        state = read_sharded_folder(Path(path))
        saved = [_indexed(state[f"optimizer_{i}"]) for i in range(len(state)) if f"optimizer_{i}" in state]
    else:
        saved = load_file(path)["optimizers"]
    return read_indexed_states(saved, classes, OPTIMIZERS, SLOTS, to_numpy, _step)


def _add_step(state: dict[Any, Any], optimizer: NeutralOptimizer) -> None:
    if optimizer.kind in ("adam", "adamw"):  # torch counts Adam's steps per parameter
        for entry in state.values():
            entry["step"] = torch.tensor(float(optimizer.step or 0))


def write_optimizers(optimizers: list[NeutralOptimizer], path: Path, shapes: list[tuple[int, ...]]) -> None:
    """A torch training-state file; the hyperparameters (param_groups) are taken from the
    optimizer the state is loaded into (see ``persistence.py``)."""
    save(training_state_layout(converted_indexed_states(optimizers, "torch", SLOTS, torch.from_numpy, _add_step)), path)


def optimizer_class(optimizer: NeutralOptimizer) -> str:
    return OPTIMIZER_CLASSES[optimizer.kind]
