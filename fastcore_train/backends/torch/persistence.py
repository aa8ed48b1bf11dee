"""``driver.io`` for torch: model and training state with ``torch.save``/``torch.load``, and the
random state of torch's generators. Sharded drivers (FairScale, FSDP, DeepSpeed) subclass it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from fastcore_train.backends.torch import rng
from fastcore_train.drivers.persistence import Persistence


class TorchPersistence(Persistence):
    """State dicts (or whole pickled modules, ``only_state_dict=False``) in ``.pt`` files."""

    model_file_suffix = ".pt"

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        model = self.driver.unwrap_model()
        torch.save(model.state_dict() if only_state_dict else model, path, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        loaded = torch.load(path, map_location=self.driver.device, weights_only=only_state_dict, **kwargs)
        if isinstance(loaded, torch.nn.Module):
            loaded = loaded.state_dict()
        elif not only_state_dict and not isinstance(loaded, dict):
            raise TypeError(f"{str(path)!r} holds a {type(loaded).__name__}, not a model or state dict.")
        self.driver.unwrap_model().load_state_dict(loaded)

    def save_training_state(self, path: Path) -> None:
        torch.save(self.training_state([optimizer.state_dict() for optimizer in self.driver.optimizers]), path)

    def load_training_state(self, path: Path) -> None:
        self.restore_training_state(torch.load(path, map_location=self.driver.device, weights_only=True))

    def rng_state(self) -> dict[str, Any]:
        return rng.get_rng_state()

    def load_rng_state(self, state: dict[str, Any]) -> None:
        rng.set_rng_state(state)
