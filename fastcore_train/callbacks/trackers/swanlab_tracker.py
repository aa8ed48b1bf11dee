"""``SwanLabCallback``: the training loss and evaluation results as a SwanLab run.

By default the run is written offline into ``<folder>/swanlog`` (no account, no network): each
start of the run writes a ``run-<time>-<id>`` folder holding a ``run-<id>.swanlab`` file; upload
it later with ``swanlab sync <folder>/swanlog/run-*``. ``mode="local"`` also serves SwanLab's
local dashboard (``swanlab watch <folder>/swanlog``; it needs ``pip install 'swanlab[dashboard]'``),
``mode="online"`` (or the ``SWANLAB_MODE`` variable) logs to the SwanLab service.
"""
from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any, Optional, Union

from fastcore_train.callbacks.tensorboard_logger import tag_for
from fastcore_train.callbacks.trackers.run_tracker import RunTrackerCallback

INSTALL_HINT = "SwanLabCallback needs swanlab: pip install 'fastcore-train[trackers]' (or swanlab)"
MODES = ("offline", "local", "online", "disabled")


class SwanLabCallback(RunTrackerCallback):
    """Log ``train/loss``, ``evaluate/<result>`` and ``epoch`` at step = batches trained. Rank 0
    only; the run id is kept in checkpoints, so a resumed training continues the same run
    (offline, each start writes its own ``run-*`` folder with that id; ``swanlab sync`` joins
    them). A training that fails marks its run crashed.

    ``project``: the SwanLab project; ``run_name``: the experiment's name (default: the run
    folder's name, i.e. its start time); ``mode``: ``"offline"`` (default unless
    ``SWANLAB_MODE`` says otherwise), ``"local"``, ``"online"``.
    """

    package = "swanlab"
    install_hint = INSTALL_HINT

    def __init__(self, folder: Union[str, Path] = "logs", log_every_n_batches: int = 50,
                 run_name: Optional[str] = None, project: str = "fastcore_train", mode: Optional[str] = None) -> None:
        super().__init__(folder, log_every_n_batches, run_name)
        self.mode = mode or os.environ.get("SWANLAB_MODE") or "offline"
        if self.mode not in MODES:
            raise ValueError(f"SwanLabCallback mode must be one of {', '.join(MODES)}, got {self.mode!r}.")
        self.project = project
        self._run: Any = None
        self._epoch_step: Optional[int] = None  # SwanLab keeps one value per key and step
        self._error: Optional[BaseException] = None

    @property
    def log_dir(self) -> Path:
        """Where SwanLab writes its run folders."""
        return Path(self.folder) / "swanlog"

    def open(self, trainer: Any, resumed_at: int) -> None:
        import swanlab
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._error = None
        self._run = swanlab.init(project=self.project, name=self.display_name(), id=self.run_id,
                                 log_dir=str(self.log_dir), mode=self.mode, resume="allow")
        self.run_id = self._run.id

    def write(self, kind: str, step: int, epoch: int, values: dict[str, float]) -> None:
        record = {tag_for(kind, name): value for name, value in values.items()}
        if self._epoch_step != step:
            record["epoch"] = epoch
            self._epoch_step = step
        self._run.log(record, step=step)

    def close(self, trainer: Any) -> None:
        if self._run is None:
            return
        run, self._run = self._run, None
        if self._error is None:
            run.finish()
        else:
            run.finish(state="crashed", error="".join(traceback.format_exception_only(self._error)).strip())

    def on_exception(self, trainer: Any, exception: BaseException) -> None:
        self._error = exception
        super().on_exception(trainer, exception)
