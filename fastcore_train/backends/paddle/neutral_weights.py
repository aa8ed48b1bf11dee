"""paddle's side of the neutral weights format (:mod:`fastcore_train.convert`).

paddle stores a Linear's weight as ``[in, out]`` (torch: ``[out, in]``), names batch norm's
running statistics ``_mean``/``_variance`` and keeps no batch count, and lists an RNN's tensors
twice (torch-style ``weight_ih_l0`` and the cells' ``0.cell.weight_ih``, one tensor under two
names). Gate orders agree with torch (LSTM ``i, f, g, o``; GRU ``r, z, n``), as do conv and
embedding layouts. Optimizer files are those of ``persistence.py`` (accumulators by parameter
index); Adam's step count is paddle's ``beta1_pow_acc = beta1 ** (step + 1)``.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import numpy as np
import paddle

from fastcore_train.backends.paddle.persistence import PaddlePersistence, FORMAT, load_file
from fastcore_train.convert.layout import RNN_KINDS, TensorSpec, find_layer, rnn_tensor_names
from fastcore_train.convert.optimizer_state import CONVERTED_KEY, NeutralOptimizer, check_slots, saved_optimizers
from fastcore_train.drivers.persistence import training_state_layout

#: The model file name's suffix in a checkpoint.
MODEL_SUFFIX = PaddlePersistence.model_file_suffix
_nn = paddle.nn
LAYERS = ((_nn.Linear, "linear"), (_nn.Conv1D, "conv1d"), (_nn.Conv2D, "conv2d"), (_nn.Embedding, "embedding"),
          (_nn.LayerNorm, "layer_norm"), (_nn.layer.norm._BatchNormBase, "batch_norm"), (_nn.LSTM, "lstm"),
          (_nn.GRU, "gru"))
OPTIMIZERS = {"SGD": "sgd", "Momentum": "sgd", "Adam": "adam", "AdamW": "adamw"}
#: neutral slot -> paddle accumulator
ACCUMULATORS = {"momentum_buffer": "velocity", "exp_avg": "moment1", "exp_avg_sq": "moment2"}
OPTIMIZER_CLASSES = {"adam": "paddle.optimizer.adam.Adam", "adamw": "paddle.optimizer.adamw.AdamW"}


def _rnn_info(module: Any) -> Optional[dict[str, Any]]:
    if getattr(module, "proj_size", 0) or len(module.state_dict()) != 8 * module.num_layers * module.num_directions:
        return None  # projections and bias-free RNNs are not mapped
    return {"num_layers": int(module.num_layers), "bidirectional": module.num_directions == 2}


def layer_kind(module: Any) -> Optional[tuple[str, dict[str, Any]]]:
    """``(kind, info)`` of a standard layer, None for any other layer."""
    return find_layer(module, LAYERS, _rnn_info)


def tensor_specs(kind: str, info: dict[str, Any]) -> list[TensorSpec]:
    if kind in RNN_KINDS:
        specs = [TensorSpec(name, name) for name in rnn_tensor_names(info)]
        for name in rnn_tensor_names(info):  # the cells' names for the same tensors
            base, rest = name.split("_l", 1)
            layer, reverse = (rest[:-len("_reverse")], True) if rest.endswith("_reverse") else (rest, False)
            cell = ("cell_bw" if reverse else "cell_fw") if info.get("bidirectional") else "cell"
            specs.append(TensorSpec(f"{layer}.{cell}.{base}", name, alias_of=name))
        return specs
    specs = [TensorSpec("weight", "weight", transpose=kind == "linear")] if info.get("weight", True) else []
    if info.get("bias", True) and kind != "embedding":
        specs.append(TensorSpec("bias", "bias"))
    if kind == "batch_norm":
        specs += [TensorSpec("_mean", "running_mean", buffer=True), TensorSpec("_variance", "running_var", buffer=True)]
    return specs


def to_numpy(value: Any) -> np.ndarray:
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


from_numpy = paddle.to_tensor


def load(path: Path) -> Any:
    return load_file(path, return_numpy=True)


def save(obj: Any, path: Path) -> None:
    paddle.save(obj, str(path))


def load_state(model: Any, state: dict[str, Any]) -> None:
    model.set_state_dict(state)


def _steps(beta_pow: np.ndarray, beta: float) -> int:
    value = float(np.asarray(beta_pow).ravel()[0])
    if value <= 0.0 or beta <= 0.0:
        return 10**6  # the power underflowed: bias correction is 1, as after very many steps
    return max(int(round(math.log(value) / math.log(beta))) - 1, 0)


def read_optimizers(path: Path, classes: list[str]) -> list[NeutralOptimizer]:
    """The optimizers of a paddle training-state file, by index of parameter."""
    result = []
    for class_name, kind, state in saved_optimizers(load(path)["optimizers"], classes, OPTIMIZERS):
        accumulators = state["accumulators"]
        slots: dict[Any, dict[str, np.ndarray]] = {}
        for neutral, name in ACCUMULATORS.items():
            for index, value in accumulators.get(name, {}).items():
                slots.setdefault(int(index), {})[neutral] = np.asarray(value)
        step = state.get("step")  # a file the converter wrote holds the count itself
        if step is None and kind in ("adam", "adamw") and accumulators.get("beta1_pow_acc"):
            betas = state.get("betas") or (0.9, 0.999)
            step = _steps(next(iter(accumulators["beta1_pow_acc"].values())), betas[0])
        result.append(NeutralOptimizer(kind=kind, class_name=class_name, slots=slots, step=step))
    return result


def write_optimizers(optimizers: list[NeutralOptimizer], path: Path, shapes: list[tuple[int, ...]]) -> None:
    """A paddle training-state file (``persistence.py``'s format). Adam's step count is written as
    such; loading turns it into the optimizer's beta powers with its own betas."""
    states = []
    for optimizer in optimizers:
        check_slots(optimizer, "paddle")
        accumulators: dict[str, dict[int, Any]] = {}
        for index, slots in optimizer.slots.items():
            for neutral, value in slots.items():
                accumulators.setdefault(ACCUMULATORS[neutral], {})[index] = paddle.to_tensor(np.array(value))
        states.append({"format": FORMAT, "num_parameters": None, "accumulators": accumulators, "master_weights": {},
                       "lr_scheduler": None, CONVERTED_KEY: True,
                       "step": optimizer.step if optimizer.kind in ("adam", "adamw") else None})
    save(training_state_layout(states), path)


def optimizer_class(optimizer: NeutralOptimizer) -> str:
    if optimizer.kind == "sgd":
        has_momentum = any("momentum_buffer" in slots for slots in optimizer.slots.values())
        return "paddle.optimizer.momentum.Momentum" if has_momentum else "paddle.optimizer.sgd.SGD"
    return OPTIMIZER_CLASSES[optimizer.kind]
