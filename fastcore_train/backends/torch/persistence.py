"""``driver.io`` for torch: model and training state with ``torch.save``/``torch.load``, and the
random state of torch's generators. Sharded drivers (FairScale, FSDP, DeepSpeed) subclass it.

Every file is read with ``torch.load(weights_only=True)``, torch's restricted unpickler (tensors,
plain containers, numbers, strings): a file naming any other object is refused with
:class:`~fastcore_train.utils.safe_pickle.UnsafePickleError`, its code not run. Only an explicit
``load_model(..., weights_only=False)`` unpickles a whole model, for files one trusts.
A sharded (``torch.distributed.checkpoint``) folder's ``.metadata`` is a plain pickle that
``dcp.load`` reads with ``pickle``: :func:`check_dcp_metadata` reads it through
:mod:`fastcore_train.utils.safe_pickle` first (DCP's metadata dataclasses and enums, torch
dtypes and sizes, paths), so a folder naming anything else is refused before ``dcp.load``.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import pickle
import re
from pathlib import Path
from typing import Any, Callable

import torch

from fastcore_train.backends.torch import rng, snapshot
from fastcore_train.convert.optimizer_state import CONVERTED_KEY
from fastcore_train.drivers.host_buffers import HostBuffers
from fastcore_train.drivers.persistence import Persistence
from fastcore_train.utils import safe_pickle
from fastcore_train.utils.safe_pickle import TRUSTED_HINT, UnsafePickleError

DCP_METADATA = ".metadata"  # the pickle torch.distributed.checkpoint writes into its folder
_DCP_MODULES = ("torch.distributed.checkpoint.metadata", "torch.distributed.checkpoint.filesystem")


def load_file(path: Any, map_location: Any = "cpu", weights_only: bool = True, **kwargs: Any) -> Any:
    """``torch.load`` of ``path``, with ``weights_only=True`` unless the caller trusts the file;
    torch's refusal becomes an :class:`UnsafePickleError` saying what to do."""
    try:
        return torch.load(path, map_location=map_location, weights_only=weights_only, **kwargs)
    except pickle.UnpicklingError as error:
        if not weights_only:
            raise
        named = re.search(r"GLOBAL (\S+)", str(error))
        found = f"it refers to {named.group(1)}" if named else str(error).strip().splitlines()[0]
        raise UnsafePickleError(
            f"Refused to load {str(path)!r}: {found}, and torch.load(weights_only=True) rebuilds only tensors and "
            "plain data; unpickling the rest could run code the file chose. Do not load files from a source you "
            f"do not trust. {TRUSTED_HINT}") from error


def _dcp_metadata_globals() -> dict[tuple[str, str], Any]:
    """What a ``.metadata`` may name: DCP's own dataclasses and enums (built from fields),
    ``torch.Size``, torch dtypes, layouts by name, and paths."""
    allowed: dict[tuple[str, str], Any] = {("torch", "Size"): torch.Size,
                                           ("torch.serialization", "_get_layout"): torch.serialization._get_layout}
    allowed.update({("pathlib", name): getattr(importlib.import_module("pathlib"), name)
                    for name in ("Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath")})
    allowed.update({("torch", name): value for name, value in vars(torch).items() if isinstance(value, torch.dtype)})
    for module_name in _DCP_MODULES:
        for name, value in vars(importlib.import_module(module_name)).items():
            if isinstance(value, type) and value.__module__ == module_name and (
                    dataclasses.is_dataclass(value) or issubclass(value, enum.Enum)):
                allowed[(module_name, name)] = value
    return allowed


def check_dcp_metadata(folder: Path) -> None:
    """Raise :class:`UnsafePickleError` unless ``folder/.metadata`` (a sharded checkpoint's
    index) names nothing but what :func:`_dcp_metadata_globals` allows; call before ``dcp.load``."""
    path = Path(folder) / DCP_METADATA
    if not path.is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a torch.distributed.checkpoint folder (no {DCP_METADATA}).")
    safe_pickle.load_file(path, extra=_dcp_metadata_globals())


def load_optimizer_state(optimizer: Any, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)``; a state converted from another framework (see
    ``neutral_weights.py``) holds no hyperparameters and keeps the optimizer's own."""
    if state.get(CONVERTED_KEY):
        count = sum(len(group["params"]) for group in optimizer.param_groups)
        if any(int(index) >= count for index in state["state"]):
            raise ValueError(f"The converted optimizer state covers more parameters than this optimizer's {count}; "
                             "build the optimizer over model.parameters(), as the converter assumes.")
        state = {"state": state["state"], "param_groups": optimizer.state_dict()["param_groups"]}
    optimizer.load_state_dict(state)


class TorchPersistence(Persistence):
    """State dicts (or whole pickled modules, ``only_state_dict=False``) in ``.pt`` files."""

    model_file_suffix = ".pt"
    saves_to_file_objects = True  # torch.save takes a file object: checkpoint files are hashed while written
    copies_in_background = True  # host copies release the GIL and record no autograd (see snapshot.py)

    def __init__(self, driver: Any) -> None:
        super().__init__(driver)
        #: the buffers (batch-norm statistics...) copied at the save point, kept for the next save
        self._frozen_buffers = HostBuffers()

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        torch.save(self.model_state() if only_state_dict else self.driver.unwrap_model(), path, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Load a state dict; a whole pickled model only with ``weights_only=False`` (trusted files).
        A folder is a sharded (``torch.distributed.checkpoint``) one, resharded into this model."""
        self.read_model(path, only_state_dict, **kwargs)()

    def read_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> Callable[[], None]:
        if Path(path).is_dir():  # (read and resharded in one: the second step)
            from fastcore_train.backends.torch.sharded_state import as_dispatched, load_model_folder
            return lambda: load_model_folder(as_dispatched(self.driver.unwrap_model()), Path(path))
        loaded = self.as_state_dict(load_file(path, map_location=self.driver.device, **kwargs), path, torch.nn.Module)
        return lambda: self.driver.unwrap_model().load_state_dict(loaded)

    def save_training_state(self, path: Path) -> None:
        self.write_object(self.training_state_object(), path)

    def model_state(self) -> dict[str, Any]:
        return self.driver.unwrap_model().state_dict()

    def training_state_object(self) -> dict[str, Any]:
        return self.training_state([optimizer.state_dict() for optimizer in self.driver.optimizers])

    def write_object(self, obj: Any, path: Path) -> None:
        torch.save(obj, path)

    def host_copy(self, obj: Any) -> Any:
        return snapshot.host_copy(obj, self.host_buffers)

    def freeze_buffers(self, model_state: Any) -> Any:
        return snapshot.freeze_buffers(self.driver.unwrap_model(), model_state, self._frozen_buffers)

    def load_training_state(self, path: Path) -> None:
        self.read_training_state(path)()

    def read_training_state(self, path: Path) -> Callable[[], None]:
        if Path(path).is_dir():  # a sharded driver's optimizer state, resharded for this model
            from fastcore_train.backends.torch.sharded_state import as_dispatched, load_training_state_folder
            return lambda: load_training_state_folder(self, as_dispatched(self.driver.unwrap_model()), Path(path))
        state = load_file(path, map_location=self.driver.device)
        return lambda: self.restore_training_state(state, load_optimizer_state)

    def rng_state(self) -> dict[str, Any]:
        return rng.get_rng_state()

    def load_rng_state(self, state: dict[str, Any]) -> None:
        rng.set_rng_state(state)
