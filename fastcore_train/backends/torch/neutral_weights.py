"""torch's side of the neutral weights format (:mod:`fastcore_train.convert`): which module is
which standard layer, how torch names their tensors (the neutral names are torch's own), and
reading and writing torch model and optimizer files as numpy arrays."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from fastcore_train.backends.torch.persistence import TorchPersistence, load_file
from fastcore_train.convert.layout import TensorSpec, affine_info, torch_style_specs
from fastcore_train.convert.optimizer_state import CONVERTED_KEY, NeutralOptimizer, check_slots
from fastcore_train.drivers.precision import GRAD_SCALER_KEY

#: The model file name's suffix in a checkpoint.
MODEL_SUFFIX = TorchPersistence.model_file_suffix
_nn = torch.nn
LAYERS = ((_nn.Linear, "linear"), (_nn.Conv1d, "conv1d"), (_nn.Conv2d, "conv2d"), (_nn.Embedding, "embedding"),
          (_nn.LayerNorm, "layer_norm"), (_nn.modules.batchnorm._BatchNorm, "batch_norm"), (_nn.LSTM, "lstm"),
          (_nn.GRU, "gru"))
#: torch optimizer class name -> neutral kind, and back.
OPTIMIZERS = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}
OPTIMIZER_CLASSES = {"sgd": "torch.optim.sgd.SGD", "adam": "torch.optim.adam.Adam", "adamw": "torch.optim.adamw.AdamW"}


def layer_kind(module: Any) -> Optional[tuple[str, dict[str, Any]]]:
    """``(kind, info)`` of a standard layer, None for any other module."""
    for cls, kind in LAYERS:
        if type(module) is cls or (kind == "batch_norm" and isinstance(module, cls)):
            if kind in ("lstm", "gru"):
                if getattr(module, "proj_size", 0) or not module.bias:
                    return None  # projections and bias-free RNNs are not mapped
                return kind, {"num_layers": module.num_layers, "bidirectional": module.bidirectional}
            return kind, affine_info(module)
    return None


def tensor_specs(kind: str, info: dict[str, Any]) -> list[TensorSpec]:
    return torch_style_specs(kind, info)


def model_state(model: Any) -> dict[str, np.ndarray]:
    return {name: value.detach().cpu().numpy() for name, value in model.state_dict().items()}


def load_model_state(model: Any, state: dict[str, np.ndarray]) -> None:
    model.load_state_dict({name: torch.from_numpy(np.array(value)) for name, value in state.items()})


def read_model(path: Path) -> dict[str, np.ndarray]:
    state = load_file(path)
    if not isinstance(state, dict):
        raise ValueError(f"{str(path)!r} holds a {type(state).__name__}, not a torch state dict.")
    return {name: value.detach().cpu().numpy() for name, value in state.items()}


def write_model(state: dict[str, np.ndarray], path: Path) -> None:
    torch.save({name: torch.from_numpy(np.array(value)) for name, value in state.items()}, str(path))


def read_optimizers(path: Path, classes: list[str]) -> list[NeutralOptimizer]:
    """The optimizers of a torch training-state file, by index of parameter."""
    saved = load_file(path)
    result = []
    for class_name, state in zip(classes, saved["optimizers"]):
        kind = OPTIMIZERS.get(class_name.rsplit(".", 1)[-1])
        slots, steps = {}, []
        for index, entry in state["state"].items():
            slots[int(index)] = {key: value.cpu().numpy() for key, value in entry.items()
                                 if key in ("momentum_buffer", "exp_avg", "exp_avg_sq") and value is not None}
            if "step" in entry:
                steps.append(int(float(entry["step"])))
        result.append(NeutralOptimizer(kind=kind, class_name=class_name, slots=slots,
                                       step=max(steps) if steps else None))
    return result


def write_optimizers(optimizers: list[NeutralOptimizer], path: Path, shapes: list[tuple[int, ...]]) -> None:
    """A torch training-state file; the hyperparameters (param_groups) are taken from the
    optimizer the state is loaded into (see ``persistence.py``)."""
    states = []
    for optimizer in optimizers:
        check_slots(optimizer, "torch")
        state = {}
        for index, slots in optimizer.slots.items():
            entry: dict[str, Any] = {key: torch.from_numpy(np.array(value)) for key, value in slots.items()}
            if optimizer.kind in ("adam", "adamw"):
                entry["step"] = torch.tensor(float(optimizer.step or 0))
            state[index] = entry
        states.append({"state": state, "param_groups": None, CONVERTED_KEY: True})
    torch.save({"optimizers": states, GRAD_SCALER_KEY: None}, str(path))


def optimizer_class(optimizer: NeutralOptimizer) -> str:
    return OPTIMIZER_CLASSES[optimizer.kind]

