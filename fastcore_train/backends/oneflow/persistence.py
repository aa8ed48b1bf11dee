"""``driver.io`` for oneflow (:class:`OneflowPersistence`): ``flow.save`` of the model and the
optimizers' state (``flow.save`` writes a folder, even for a path ending in a suffix), and the
per-backward reseeder's random state (see ``rng.py``).

Loading runs no code of the folder's. A ``flow.save`` folder holds ``pickled_data`` (the object,
each tensor in it pickled as a reference ``{"path": "tensor_N"}`` to a subfolder) and the tensors'
raw bytes, which oneflow's C++ reader parses. ``flow.load`` unpickles ``pickled_data`` with plain
``pickle``, so :func:`load_file` first reads it through :mod:`fastcore_train.utils.safe_pickle`
(plain data, and oneflow tensors as stand-ins that only check their reference names a subfolder)
and calls ``flow.load`` only when that succeeded. ``load_model(..., weights_only=False)`` skips
the check for a trusted folder, e.g. a whole pickled model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import oneflow as flow

from fastcore_train.convert.optimizer_state import CONVERTED_KEY
from fastcore_train.backends.oneflow import snapshot
from fastcore_train.drivers.persistence import Persistence
from fastcore_train.utils import safe_pickle

PICKLE_FILE = "pickled_data"  # the name flow.save gives the pickle in its folder
TENSOR_CLASSES = (("oneflow", "Tensor"), ("oneflow.nn", "Parameter"))  # as flow.save pickles them


def _tensor_stand_in(folder: Path) -> type:
    """A class standing in for oneflow's tensors while ``pickled_data`` is checked: it accepts only
    a reference to a tensor subfolder of ``folder``, the state ``flow.save`` gives a tensor."""
    class TensorReference:
        def __setstate__(self, state: Any) -> None:
            name = state.get("path") if isinstance(state, dict) and set(state) == {"path"} else None
            if not isinstance(name, str) or Path(name).name != name or name in ("", ".", "..") \
                    or not (folder / name).is_dir():
                raise safe_pickle.UnsafePickleError(
                    f"Refused to load {str(folder)!r}: a tensor in its {PICKLE_FILE} is {state!r}, not a reference to "
                    "one of its tensor subfolders; it was not written by flow.save.")
    return TensorReference


def load_file(path: Path, map_location: Any = None, weights_only: bool = True, **kwargs: Any) -> Any:
    """``flow.load`` of a folder written by ``flow.save``, checked first (see the module docstring)."""
    path = Path(path)
    if not (path / PICKLE_FILE).is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a folder written by oneflow.save (it has no {PICKLE_FILE}); "
                                "pass the path given to save_model.")
    if weights_only:
        stand_in = _tensor_stand_in(path)
        saved = safe_pickle.load_file(path / PICKLE_FILE, extra={name: stand_in for name in TENSOR_CLASSES},
                                      hint=safe_pickle.TRUSTED_HINT)
        if not isinstance(saved, dict) or "data" not in saved:
            raise ValueError(f"{str(path / PICKLE_FILE)!r} is not what flow.save writes; the folder is damaged.")
    return flow.load(str(path), map_location=map_location, **kwargs)


def load_optimizer_state(optimizer: Any, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)``; a state converted from another framework (see
    ``neutral_weights.py``) holds no hyperparameters and keeps the optimizer's own."""
    if state.get(CONVERTED_KEY):
        state = {"state": state["state"], "param_groups": optimizer.state_dict()["param_groups"]}
    optimizer.load_state_dict(state)


class OneflowPersistence(Persistence):
    """State dicts (or whole pickled modules) saved as oneflow folders: ``checkpoint/model.oneflow/``."""

    model_file_suffix = ".oneflow"

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """``flow.save`` of the state dict (or of the whole model): ``path`` becomes a folder."""
        flow.save(self.model_state() if only_state_dict else self.driver.unwrap_model(), str(path), **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Load a state dict; a whole pickled model only with ``weights_only=False`` (trusted folders)."""
        loaded = self.as_state_dict(load_file(path, map_location=self.driver.device, **kwargs), path, flow.nn.Module)
        self.driver.unwrap_model().load_state_dict(loaded)

    def save_training_state(self, path: Path) -> None:
        self.write_object(self.training_state_object(), path)

    def model_state(self) -> Any:
        return self.driver.unwrap_model().state_dict()

    def training_state_object(self) -> dict[str, Any]:
        return self.training_state([optimizer.state_dict() for optimizer in self.driver.optimizers])

    def write_object(self, obj: Any, path: Path) -> None:
        flow.save(obj, str(path))

    def host_copy(self, obj: Any) -> Any:
        return snapshot.host_copy(obj)

    def load_training_state(self, path: Path) -> None:
        self.restore_training_state(load_file(path, map_location=self.driver.device), load_optimizer_state)

    def rng_state(self) -> dict[str, Any]:
        return self.driver.reseeder().state()

    def load_rng_state(self, state: dict[str, Any]) -> None:
        self.driver.reseeder().load(state)
