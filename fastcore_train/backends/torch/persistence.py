"""``driver.io`` for torch: model and training state with ``torch.save``/``torch.load``, and the
random state of torch's generators. Sharded drivers (FairScale, FSDP, DeepSpeed) subclass it.

Every file is read with ``torch.load(weights_only=True)``, torch's restricted unpickler (tensors,
plain containers, numbers, strings): a file naming any other object is refused with
:class:`~fastcore_train.utils.safe_pickle.UnsafePickleError`, its code not run. Only an explicit
``load_model(..., weights_only=False)`` unpickles a whole model, for files one trusts.
"""
from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import torch

from fastcore_train.backends.torch import rng
from fastcore_train.drivers.persistence import Persistence
from fastcore_train.utils.safe_pickle import TRUSTED_HINT, UnsafePickleError


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


class TorchPersistence(Persistence):
    """State dicts (or whole pickled modules, ``only_state_dict=False``) in ``.pt`` files."""

    model_file_suffix = ".pt"

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        model = self.driver.unwrap_model()
        torch.save(model.state_dict() if only_state_dict else model, path, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Load a state dict; a whole pickled model only with ``weights_only=False`` (trusted files)."""
        loaded = load_file(path, map_location=self.driver.device, **kwargs)
        if isinstance(loaded, torch.nn.Module):
            loaded = loaded.state_dict()
        elif not isinstance(loaded, dict):
            raise TypeError(f"{str(path)!r} holds a {type(loaded).__name__}, not a model or state dict.")
        self.driver.unwrap_model().load_state_dict(loaded)

    def save_training_state(self, path: Path) -> None:
        torch.save(self.training_state([optimizer.state_dict() for optimizer in self.driver.optimizers]), path)

    def load_training_state(self, path: Path) -> None:
        self.restore_training_state(load_file(path, map_location=self.driver.device))

    def rng_state(self) -> dict[str, Any]:
        return rng.get_rng_state()

    def load_rng_state(self, state: dict[str, Any]) -> None:
        rng.set_rng_state(state)
