"""jittor's side of the neutral weights format (:mod:`fastcore_train.convert`).

jittor names and lays out the standard layers as torch does (Linear ``[out, in]``, ``Conv1d``
``[out, in, k]``, batch norm ``running_mean``/``running_var``, RNN ``weight_ih_l0``, gates
``i, f, g, o`` and ``r, z, n``), but keeps no batch count, lists an RNN's reverse direction right
after each forward tensor, and its ``parameters()`` (hence its optimizers) also list the batch-norm
statistics. Optimizer states: SGD's ``values`` (momentum), Adam's ``m`` and ``values`` (the two
moments) and ``n_step`` (its step count).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import jittor as jt
import numpy as np

from fastcore_train.backends.jittor.persistence import TRAINING_STATE_FORMAT, JittorPersistence, load_file
from fastcore_train.convert.layout import RNN_KINDS, TensorSpec, find_layer, torch_style_rnn_info, torch_style_specs
from fastcore_train.convert.optimizer_state import CONVERTED_KEY, NeutralOptimizer, check_slots, saved_optimizers

#: The model file name's suffix in a checkpoint.
MODEL_SUFFIX = JittorPersistence.model_file_suffix
#: jittor's ``parameters()`` lists buffers too, so its optimizers hold (empty) state for them.
OPTIMIZER_COVERS_BUFFERS = True
_nn = jt.nn
LAYERS = ((_nn.Linear, "linear"), (_nn.Conv1d, "conv1d"), (_nn.Conv, "conv2d"), (_nn.Embedding, "embedding"),
          (_nn.LayerNorm, "layer_norm"), (_nn.BatchNorm, "batch_norm"), (_nn.LSTM, "lstm"), (_nn.GRU, "gru"))
OPTIMIZERS = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}
OPTIMIZER_CLASSES = {"sgd": "jittor.optim.SGD", "adam": "jittor.optim.Adam", "adamw": "jittor.optim.AdamW"}
#: neutral slot -> jittor's list in a parameter group
LISTS = {"momentum_buffer": "values", "exp_avg": "m", "exp_avg_sq": "values"}


def layer_kind(module: Any) -> Optional[tuple[str, dict[str, Any]]]:
    """``(kind, info)`` of a standard layer, None for any other module."""
    return find_layer(module, LAYERS, torch_style_rnn_info)


def tensor_specs(kind: str, info: dict[str, Any]) -> list[TensorSpec]:
    if kind not in RNN_KINDS:
        return torch_style_specs(kind, info, batch_count=False)
    specs = []
    for layer in range(int(info.get("num_layers", 1))):
        for base in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            for suffix in ("", "_reverse") if info.get("bidirectional") else ("",):
                specs.append(TensorSpec(f"{base}_l{layer}{suffix}", f"{base}_l{layer}{suffix}"))
    return specs


def to_numpy(value: Any) -> np.ndarray:
    return value.numpy() if isinstance(value, jt.Var) else np.asarray(value)


def from_numpy(value: np.ndarray) -> np.ndarray:
    return value  # jittor's files and load_state_dict take numpy arrays


load = load_file


def save(obj: Any, path: Path) -> None:
    jt.save(obj, str(path))


def load_state(model: Any, state: dict[str, np.ndarray]) -> None:
    model.load_state_dict(state)
    jt.sync_all()


def read_optimizers(path: Path, classes: list[str]) -> list[NeutralOptimizer]:
    """The optimizers of a jittor training-state file, by index of parameter."""
    result = []
    for class_name, kind, state in saved_optimizers(load_file(path)["optimizers"], classes, OPTIMIZERS):
        defaults = state["defaults"]
        slots: dict[Any, dict[str, np.ndarray]] = {}
        index = 0
        for group in defaults.get("param_groups", []):
            count = len(group.get("values", []))
            for position in range(count):
                slots[index + position] = {neutral: to_numpy(group[name][position]) for neutral, name in LISTS.items()
                                           if name in group and (kind == "sgd") == (neutral == "momentum_buffer")}
                if not any(np.any(value) for value in slots[index + position].values()):
                    slots[index + position] = {}  # a buffer, or a parameter never stepped
            index += count
        step = int(defaults.get("n_step", 0)) if kind in ("adam", "adamw") else None
        result.append(NeutralOptimizer(kind=kind, class_name=class_name, slots=slots, step=step))
    return result


def write_optimizers(optimizers: list[NeutralOptimizer], path: Path, shapes: list[tuple[int, ...]]) -> None:
    """A jittor training-state file: one parameter group covering every parameter (buffers
    included, with zero state); the hyperparameters stay those of the loading optimizer."""
    states = []
    for optimizer in optimizers:
        check_slots(optimizer, "jittor")
        group: dict[str, list[np.ndarray]] = {name: [] for name in (("values",) if optimizer.kind == "sgd"
                                                                    else ("values", "m"))}
        for index, shape in enumerate(shapes):
            slots = optimizer.slots.get(index, {})
            for neutral, name in LISTS.items():
                if name in group and (optimizer.kind == "sgd") == (neutral == "momentum_buffer"):
                    group[name].append(np.array(slots[neutral]) if neutral in slots else np.zeros(shape, np.float32))
        defaults = {"param_groups": [group], CONVERTED_KEY: True}
        if optimizer.kind in ("adam", "adamw"):
            defaults["n_step"] = int(optimizer.step or 0)
        states.append({"defaults": defaults})
    save({"format": TRAINING_STATE_FORMAT, "optimizers": states}, path)


def optimizer_class(optimizer: NeutralOptimizer) -> str:
    return OPTIMIZER_CLASSES[optimizer.kind]
