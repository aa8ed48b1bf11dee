"""Loading ``torch.distributed.checkpoint`` (DCP) folders into any torch model, sharded or not.

A DCP folder holds each saving rank's shards and an index (``.metadata``); ``dcp.load`` fills the
state dict of the model it is given, whatever that model's sharding (FSDP1, FSDP2, tensor
parallel DTensors, or plain tensors in one process): loading reshards. The sharded drivers save
their state with the user model under a method-dispatching wrapper (keys ``model.<name>``);
:func:`as_dispatched` gives a plain model the same keys, so one process reads those folders too.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_optimizer_state_dict, set_model_state_dict,
                                                     set_optimizer_state_dict)

from fastcore_train.backends.torch.persistence import check_dcp_metadata
from fastcore_train.drivers.precision import GRAD_SCALER_KEY

DISPATCH_PREFIX = "model."  # the user's module inside the driver's method-dispatching wrapper
SHARDED = StateDictOptions(full_state_dict=False)


def strip(key: str) -> str:
    return key[len(DISPATCH_PREFIX):] if key.startswith(DISPATCH_PREFIX) else key


def prefixed(state: dict[str, Any]) -> dict[str, Any]:
    return {DISPATCH_PREFIX + key: value for key, value in state.items()}


def as_dispatched(model: torch.nn.Module) -> torch.nn.Module:
    """A module holding ``model`` as ``.model``: its state dict keys (and the parameter names in
    optimizer state dicts) are those of the sharded drivers' wrapper."""
    holder = torch.nn.Module()
    holder.model = model
    return holder


def saved_optimizer_count(path: Path) -> int:
    """How many optimizers a sharded training-state folder holds (from its metadata)."""
    check_dcp_metadata(path)
    keys = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    return len({key.split(".", 1)[0] for key in keys if key.startswith("optimizer_")})


def load_model_folder(root: torch.nn.Module, path: Path) -> None:
    """Fill ``root`` (the dispatching wrapper, or :func:`as_dispatched`) from the DCP folder ``path``."""
    state = {strip(key): value for key, value in get_model_state_dict(root, options=SHARDED).items()}
    check_dcp_metadata(path)
    dcp.load(state, checkpoint_id=path)
    set_model_state_dict(root, prefixed(state), options=SHARDED)


def load_training_state_folder(io: Any, root: torch.nn.Module, path: Path) -> None:
    """Restore ``io.driver``'s optimizers (and grad scaler) from the DCP folder ``path``."""
    driver = io.driver
    io.check_optimizer_count(saved_optimizer_count(path))
    state: dict[str, Any] = {f"optimizer_{i}": get_optimizer_state_dict(root, optimizer, options=SHARDED)
                             for i, optimizer in enumerate(driver.optimizers)}
    scaler = driver.precision.state_dict()  # the layout dcp.load fills in
    if scaler is not None:
        state[GRAD_SCALER_KEY] = scaler
    dcp.load(state, checkpoint_id=path)  # its .metadata checked by saved_optimizer_count
    for i, optimizer in enumerate(driver.optimizers):
        set_optimizer_state_dict(root, optimizer, state[f"optimizer_{i}"], options=SHARDED)
    driver.precision.load_state_dict(state.get(GRAD_SCALER_KEY))
