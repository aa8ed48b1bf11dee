"""``driver.io`` for oneflow (:class:`OneflowPersistence`): ``flow.save``/``flow.load`` of the model
and the optimizers' state (``flow.save`` writes a folder, even for a path ending in a suffix),
and the per-backward reseeder's random state (see ``rng.py``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import oneflow as flow

from fastcore_train.drivers.persistence import Persistence


class OneflowPersistence(Persistence):
    """State dicts (or whole pickled modules) saved as oneflow folders: ``checkpoint/model.oneflow/``."""

    model_file_suffix = ".oneflow"

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """``flow.save`` of the state dict (or of the whole model): ``path`` becomes a folder."""
        model = self.driver.unwrap_model()
        flow.save(model.state_dict() if only_state_dict else model, str(path), **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        if not Path(path).is_dir():
            raise FileNotFoundError(f"{str(path)!r} is not a folder written by oneflow.save; pass the path "
                                    "given to save_model.")
        loaded = flow.load(str(path), map_location=self.driver.device, **kwargs)
        if isinstance(loaded, flow.nn.Module):
            loaded = loaded.state_dict()
        elif not isinstance(loaded, dict):
            raise TypeError(f"{str(path)!r} holds a {type(loaded).__name__}, not a model or state dict.")
        self.driver.unwrap_model().load_state_dict(loaded)

    def save_training_state(self, path: Path) -> None:
        flow.save(self.training_state([optimizer.state_dict() for optimizer in self.driver.optimizers]), str(path))

    def load_training_state(self, path: Path) -> None:
        self.restore_training_state(flow.load(str(path), map_location=self.driver.device))

    def rng_state(self) -> dict[str, Any]:
        return self.driver.reseeder().state()

    def load_rng_state(self, state: dict[str, Any]) -> None:
        self.driver.reseeder().load(state)
