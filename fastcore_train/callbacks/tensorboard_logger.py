"""``TensorBoardCallback``: the training loss and evaluation results as TensorBoard scalars.

Events are written by tensorboardX, a framework-neutral writer, so the same callback serves
every backend; view them with ``tensorboard --logdir <folder>``.
"""
from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path
from typing import Any, Union

from fastcore_train.callbacks.metric_log import MetricLogCallback

INSTALL_HINT = "TensorBoardCallback needs tensorboardX: pip install 'fastcore-train[tensorboard]' (or tensorboardX)"


def tag_for(kind: str, name: str) -> str:
    """The TensorBoard tag of a value: ``kind/name`` with the characters tags may not hold
    (such as the ``#`` of ``acc#acc#dev``) replaced by ``_``."""
    return f"{kind}/" + re.sub(r"[^A-Za-z0-9_.\-/]", "_", name)


class TensorBoardCallback(MetricLogCallback):
    """Write scalars ``train/loss`` and ``evaluate/<result>`` (x axis: batches trained; ``#`` in
    result names becomes ``_``, e.g. ``evaluate/acc_acc_dev``) into
    ``folder/<run start time>/``, which TensorBoard shows as one run. Only rank 0 writes.

    A resumed run purges the events the interrupted run wrote after its checkpoint.
    """

    def __init__(self, folder: Union[str, Path] = "logs", log_every_n_batches: int = 50, run_subfolder: bool = True,
                 flush_secs: int = 30) -> None:
        super().__init__(folder, log_every_n_batches, run_subfolder)
        if importlib.util.find_spec("tensorboardX") is None:  # fail now, not after training began
            raise ImportError(INSTALL_HINT)
        self.flush_secs = flush_secs
        self._writer: Any = None

    def open(self, trainer: Any, resumed_at: int) -> None:
        from tensorboardX import SummaryWriter
        # Event files are named by the second they were opened in; the suffix keeps a writer opened
        # in the same second (a quick resume) from replacing an earlier one's file.
        self._writer = SummaryWriter(logdir=str(self.run_folder), flush_secs=self.flush_secs,
                                     purge_step=resumed_at + 1 if resumed_at > 0 else None,
                                     filename_suffix=f".{time.time_ns()}")

    def write(self, kind: str, step: int, epoch: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            self._writer.add_scalar(tag_for(kind, name), value, global_step=step)

    def close(self, trainer: Any) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
