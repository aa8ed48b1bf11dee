"""What every metric-log callback shares: which values are logged, when, where, and on which rank.

A :class:`MetricLogCallback` records the training loss and the learning rates every
``log_every_n_batches`` batches, and every evaluation's results, as ``(kind, step, epoch, values)``
with ``kind`` ``"train"`` or ``"evaluate"``, ``step`` the number of batches trained so far and
``epoch`` the 1-based epoch. Subclasses decide how a record is written (a CSV file, TensorBoard
events, a plot). Only rank 0 writes. Each run writes into its own ``folder/<start time>`` (see
:func:`~fastcore_train.callbacks.run_folder.new_run_folder`); a resumed run continues in the
interrupted run's folder and first drops what that run logged after the checkpoint, so the logs
read like one uninterrupted run.
"""
from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from fastcore_train.callbacks.run_folder import new_run_folder
from fastcore_train.drivers.registry import backend_part
from fastcore_train.events.callback import Callback

TRAIN = "train"
EVALUATE = "evaluate"


def numeric_values(values: Mapping[str, Any]) -> dict[str, float]:
    """The entries of ``values`` that are real numbers (python, numpy or 0-d arrays), as floats."""
    numeric: dict[str, float] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, numbers.Real):
            numeric[str(key)] = float(value)
        elif getattr(value, "shape", None) == () and hasattr(value, "item"):
            item = value.item()
            if isinstance(item, numbers.Real) and not isinstance(item, bool):
                numeric[str(key)] = float(item)
    return numeric


def learning_rate_values(lr_module: Any, optimizers: list) -> dict[str, float]:
    """Each optimizer's learning rates, read through the backend's ``lr`` part: ``lr`` for one
    optimizer with one rate, else ``lr#<optimizer index>`` (``lr#<optimizer>.<group>`` for an
    optimizer whose parameter groups each have a rate)."""
    rates = [lr_module.learning_rates(optimizer) for optimizer in optimizers]
    if len(rates) == 1 and len(rates[0]) == 1:
        return {"lr": float(rates[0][0])}
    values: dict[str, float] = {}
    for index, groups in enumerate(rates):
        for group, rate in enumerate(groups):
            values[f"lr#{index}" if len(groups) == 1 else f"lr#{index}.{group}"] = float(rate)
    return values


def current_epoch(trainer: Any) -> int:
    """The 1-based epoch a value belongs to: the one in progress, or the one just finished."""
    if trainer.batch_idx_in_epoch == 0 and trainer.cur_epoch_idx > 0:
        return trainer.cur_epoch_idx
    return trainer.cur_epoch_idx + 1


class MetricLogCallback(Callback):
    """Base class: subclasses implement :meth:`open`, :meth:`write` and :meth:`close`.

    ``folder``: where run folders go (``run_subfolder=False`` writes into ``folder`` itself, and
    a new run then replaces the files an earlier run left there); ``log_every_n_batches``: how
    often the training loss and the learning rates are logged (0: never; reading a loss waits for
    the device, so logging every batch on a GPU costs a little speed).
    """

    def __init__(self, folder: Union[str, Path], log_every_n_batches: int = 50, run_subfolder: bool = True) -> None:
        if isinstance(log_every_n_batches, bool) or not isinstance(log_every_n_batches, int) \
                or log_every_n_batches < 0:
            raise ValueError(f"log_every_n_batches must be an int >= 0 (0: do not log the loss), "
                             f"got {log_every_n_batches!r}.")
        self.folder = Path(folder)
        self.log_every_n_batches = log_every_n_batches
        self.run_subfolder = run_subfolder
        self.run_folder: Optional[Path] = None
        self._writes = False
        self._is_open = False
        self._lr_module: Any = None  # the backend's ``lr`` part, found when training begins

    @property
    def callback_name(self) -> str:
        return f"{type(self).__name__}#{self.folder}"

    # ------------------------------------------------------------------ to implement
    def open(self, trainer: Any, resumed_at: int) -> None:
        """Prepare writing into ``self.run_folder``; ``resumed_at`` > 0 when resuming from that step
        (drop records of later steps written by the interrupted run)."""

    def write(self, kind: str, step: int, epoch: int, values: dict[str, float]) -> None:
        """Write one record."""
        raise NotImplementedError

    def close(self, trainer: Any) -> None:
        """Flush and release files; called when training ends or fails."""

    # ------------------------------------------------------------------ public
    def log_values(self, trainer: Any, kind: str, values: Mapping[str, Any]) -> None:
        """Log ``values`` now under ``kind`` (e.g. results of extra evaluations); rank 0 only.

        Values that are not finite real numbers are logged as they are (NaN/inf show in plots as
        gaps); non-numeric entries are skipped.
        """
        if not self._writes:
            return
        if not self._is_open:
            self._open(trainer)
        numeric = numeric_values(values)
        if numeric:
            self.write(kind, trainer.global_forward_batches, current_epoch(trainer), numeric)

    # ------------------------------------------------------------------ events
    def on_after_trainer_initialized(self, trainer: Any, driver: Any) -> None:
        self.run_folder = new_run_folder(self.folder, driver, trainer) if self.run_subfolder else self.folder
        self._writes = driver.comm.is_global_zero()

    def on_train_begin(self, trainer: Any) -> None:
        if self._writes and not self._is_open:
            self._open(trainer)
        if self._writes and self.log_every_n_batches:
            try:
                self._lr_module = backend_part(trainer.model, "lr")
            except (TypeError, ImportError, NotImplementedError):  # no ``lr`` part: only the loss is logged
                self._lr_module = None

    def on_train_batch_end(self, trainer: Any) -> None:
        every = self.log_every_n_batches
        if self._writes and every and trainer.global_forward_batches % every == 0:
            values: dict[str, float] = {}
            if trainer.last_loss is not None:
                values["loss"] = float(trainer.driver.data.to_numeric(trainer.last_loss))
            if self._lr_module is not None:
                values.update(learning_rate_values(self._lr_module, trainer.driver.optimizers))
            if values:
                self.write(TRAIN, trainer.global_forward_batches, current_epoch(trainer), values)

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        self.log_values(trainer, EVALUATE, results)

    def on_train_end(self, trainer: Any) -> None:
        self._close(trainer)

    def on_exception(self, trainer: Any, exception: BaseException) -> None:
        self._close(trainer)

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {"run_folder": str(self.run_folder)}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        if states and states.get("run_folder"):
            self.run_folder = Path(states["run_folder"])

    # ------------------------------------------------------------------ helpers
    def folder_for_run(self, trainer: Any) -> Path:
        """The folder this run writes into (by default the one chosen at initialisation)."""
        assert self.run_folder is not None, "the run folder is chosen when the Trainer is built"
        return self.run_folder

    def _open(self, trainer: Any) -> None:
        self.run_folder = self.folder_for_run(trainer)
        self.run_folder.mkdir(parents=True, exist_ok=True)
        self.open(trainer, trainer.global_forward_batches)
        self._is_open = True

    def _close(self, trainer: Any) -> None:
        if self._is_open:
            self._is_open = False
            self.close(trainer)
