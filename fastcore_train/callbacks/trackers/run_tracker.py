"""What every experiment tracker shares: its package checked up front, a run named after the run
folder, and the run's id kept in checkpoints so that a resumed training continues the same run."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Optional, Union

from fastcore_train.callbacks.metric_log import MetricLogCallback


class RunTrackerCallback(MetricLogCallback):
    """Base of the tracker callbacks: subclasses name ``package`` and ``install_hint``, open their
    run in :meth:`open` (setting :attr:`run_id`) and write in :meth:`write`."""

    #: The module the tracker imports, and the error message when it is missing.
    package = ""
    install_hint = ""

    def __init__(self, folder: Union[str, Path], log_every_n_batches: int, run_name: Optional[str]) -> None:
        super().__init__(folder, log_every_n_batches, run_subfolder=True)
        if importlib.util.find_spec(self.package) is None:  # fail now, not after training began
            raise ImportError(self.install_hint)
        self.run_name = run_name
        #: The tracker's id of the run; restored from a checkpoint when resuming.
        self.run_id: Optional[str] = None

    def display_name(self) -> Optional[str]:
        """The run's name in the tracker: ``run_name``, else the run folder's name (its start time)."""
        return self.run_name or (self.run_folder.name if self.run_folder is not None else None)

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {**super().on_save_checkpoint(trainer), "run_id": self.run_id}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        super().on_load_checkpoint(trainer, states)
        if states and states.get("run_id"):
            self.run_id = states["run_id"]
