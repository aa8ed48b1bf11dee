"""``CurvePlotCallback``: a PNG of the loss and evaluation curves, written when training ends."""
from __future__ import annotations

import importlib.util
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional, Union

from fastcore_train.callbacks.metric_log import MetricLogCallback
from fastcore_train.log import logger

INSTALL_HINT = "CurvePlotCallback needs matplotlib: pip install 'fastcore-train[plot]' (or matplotlib)"


class CurvePlotCallback(MetricLogCallback):
    """Plot the training loss and every evaluation result against batches trained into one PNG.

    ``folder=None`` puts the image beside the checkpoints: in the run folder of the trainer's
    first :class:`~fastcore_train.callbacks.CheckpointCallback` (or ``logs/<run start time>``
    when there is none). The image is (re)written when training ends or fails; the curves survive
    a resume (they travel in the checkpoint). Only rank 0 draws.
    """

    def __init__(self, folder: Union[str, Path, None] = None, log_every_n_batches: int = 10, run_subfolder: bool = True,
                 filename: str = "curves.png", dpi: int = 100) -> None:
        super().__init__("logs" if folder is None else folder, log_every_n_batches, run_subfolder)
        if importlib.util.find_spec("matplotlib") is None:
            raise ImportError(INSTALL_HINT)
        self.beside_checkpoints = folder is None
        self.filename = filename
        self.dpi = dpi
        #: (kind, name) -> ([steps], [values]), in logging order.
        self.history: dict[tuple[str, str], tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
        self.path: Optional[Path] = None

    def folder_for_run(self, trainer: Any) -> Path:
        if self.beside_checkpoints:
            from fastcore_train.callbacks.checkpoint_callback import CheckpointCallback
            for callback in trainer.callback_manager.callbacks:
                if isinstance(callback, CheckpointCallback) and callback.run_folder is not None:
                    return callback.run_folder
        return super().folder_for_run(trainer)

    def write(self, kind: str, step: int, epoch: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            steps, series = self.history[(kind, name)]
            steps.append(step)
            series.append(value)

    def close(self, trainer: Any) -> None:
        if not self.history:
            return
        self.path = self.run_folder / self.filename
        draw_curves(self.history, self.path, self.dpi)
        logger.info("Loss and metric curves: %s", self.path)

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {**super().on_save_checkpoint(trainer),
                "history": {f"{kind}\t{name}": [list(s), list(v)] for (kind, name), (s, v) in self.history.items()}}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        super().on_load_checkpoint(trainer, states)
        if states and "history" in states:
            self.history.clear()
            for key, (steps, values) in states["history"].items():
                kind, name = key.split("\t", 1)
                self.history[(kind, name)] = (list(steps), list(values))


def draw_curves(history: dict[tuple[str, str], tuple[list[int], list[float]]], path: Path, dpi: int = 100) -> None:
    """One panel per series (loss first), up to three panels a row; written atomically to ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    keys = sorted(history, key=lambda key: (key[0] != "train", key))
    columns = min(3, len(keys))
    rows = math.ceil(len(keys) / columns)
    figure = Figure(figsize=(4.2 * columns, 3.2 * rows), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    for index, (kind, name) in enumerate(keys):
        axes = figure.add_subplot(rows, columns, index + 1)
        steps, values = history[(kind, name)]
        axes.plot(steps, values, marker="o" if len(steps) < 30 else None, markersize=3)
        axes.set_title(f"{kind}: {name}", fontsize=10)
        axes.set_xlabel("batches trained")
        axes.grid(alpha=0.3)
    temporary = path.with_name(path.name + ".tmp")
    figure.savefig(temporary, format="png")
    temporary.replace(path)
