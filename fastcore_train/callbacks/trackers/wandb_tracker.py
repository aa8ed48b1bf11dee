"""``WandbCallback``: the training loss and evaluation results as a Weights & Biases run.

By default the run is written offline into ``<folder>/wandb`` (no account, no network); upload it
later with ``wandb sync <folder>/wandb/offline-run-*``. ``mode="online"`` (or the ``WANDB_MODE``
variable) logs to the W&B service instead.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Optional, Union

from fastcore_train.callbacks.tensorboard_logger import tag_for
from fastcore_train.callbacks.trackers.run_tracker import RunTrackerCallback

INSTALL_HINT = "WandbCallback needs wandb: pip install 'fastcore-train[trackers]' (or wandb)"


class WandbCallback(RunTrackerCallback):
    """Log ``train/loss``, ``evaluate/<result>`` and ``epoch`` at step = batches trained. Rank 0
    only; the run id is kept in checkpoints, so a resumed training continues the same run
    (offline, each start writes its own ``offline-run-*`` folder of that run; ``wandb sync``
    joins them).

    ``project``: the W&B project; ``run_name``: the run's display name (default: the run folder's
    name); ``mode``: ``"offline"`` (default unless ``WANDB_MODE`` says otherwise), ``"online"``.
    """

    package = "wandb"
    install_hint = INSTALL_HINT

    def __init__(self, folder: Union[str, Path] = "logs", log_every_n_batches: int = 50,
                 run_name: Optional[str] = None, project: str = "fastcore_train", mode: Optional[str] = None) -> None:
        super().__init__(folder, log_every_n_batches, run_name)
        self.project = project
        self.mode = mode or os.environ.get("WANDB_MODE") or "offline"
        self._run: Any = None

    def open(self, trainer: Any, resumed_at: int) -> None:
        import wandb
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        if self.run_id is None:
            self.run_id = uuid.uuid4().hex[:12]
        self._run = wandb.init(project=self.project, name=self.display_name(), id=self.run_id,
                               dir=str(self.folder), mode=self.mode, resume="allow", reinit="create_new")

    def write(self, kind: str, step: int, epoch: int, values: dict[str, float]) -> None:
        record = {tag_for(kind, name): value for name, value in values.items()}
        self._run.log({**record, "epoch": epoch}, step=step)

    def close(self, trainer: Any) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None
