"""``WandbCallback``: the training loss and evaluation results as a Weights & Biases run.

By default the run is written offline into ``<folder>/wandb`` (no account, no network); upload it
later with ``wandb sync <folder>/wandb/offline-run-*``. ``mode="online"`` (or the ``WANDB_MODE``
variable) logs to the W&B service instead.
"""
from __future__ import annotations

import importlib.util
import os
import uuid
from pathlib import Path
from typing import Any, Optional, Union

from fastcore_train.callbacks.metric_log import MetricLogCallback
from fastcore_train.callbacks.tensorboard_logger import tag_for

INSTALL_HINT = "WandbCallback needs wandb: pip install 'fastcore-train[trackers]' (or wandb)"


class WandbCallback(MetricLogCallback):
    """Log ``train/loss``, ``evaluate/<result>`` and ``epoch`` at step = batches trained. Rank 0
    only; the run id is kept in checkpoints, so a resumed training continues the same run
    (offline, each start writes its own ``offline-run-*`` folder of that run; ``wandb sync``
    joins them).

    ``project``: the W&B project; ``run_name``: the run's display name (default: the run folder's
    name); ``mode``: ``"offline"`` (default unless ``WANDB_MODE`` says otherwise), ``"online"``.
    """

    def __init__(self, folder: Union[str, Path] = "logs", log_every_n_batches: int = 50,
                 run_name: Optional[str] = None, project: str = "fastcore_train", mode: Optional[str] = None) -> None:
        super().__init__(folder, log_every_n_batches, run_subfolder=True)
        if importlib.util.find_spec("wandb") is None:  # fail now, not after training began
            raise ImportError(INSTALL_HINT)
        self.project = project
        self.run_name = run_name
        self.mode = mode or os.environ.get("WANDB_MODE") or "offline"
        self.run_id: Optional[str] = None
        self._run: Any = None

    def open(self, trainer: Any, resumed_at: int) -> None:
        import wandb
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        if self.run_id is None:
            self.run_id = uuid.uuid4().hex[:12]
        name = self.run_name or (self.run_folder.name if self.run_folder is not None else None)
        self._run = wandb.init(project=self.project, name=name, id=self.run_id, dir=str(self.folder),
                               mode=self.mode, resume="allow", reinit="create_new")

    def write(self, kind: str, step: int, epoch: int, values: dict[str, float]) -> None:
        record = {tag_for(kind, name): value for name, value in values.items()}
        self._run.log({**record, "epoch": epoch}, step=step)

    def close(self, trainer: Any) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {**super().on_save_checkpoint(trainer), "run_id": self.run_id}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        super().on_load_checkpoint(trainer, states)
        if states and states.get("run_id"):
            self.run_id = states["run_id"]
