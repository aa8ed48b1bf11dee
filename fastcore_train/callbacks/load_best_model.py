"""``LoadBestModelCallback``: keep the weights of the best evaluation and restore them at the end."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Union

from fastcore_train.callbacks.monitor_mixin import MonitorTracker
from fastcore_train.controllers.monitor import Monitor
from fastcore_train.events.callback import Callback
from fastcore_train.log import logger


class LoadBestModelCallback(Callback):
    """Save the model whenever ``monitor`` improves; load the best one when training ends.

    The best model is kept in ``save_folder`` (a temporary folder when None), deleted after
    training unless ``delete_after_train=False``.
    """

    def __init__(self, monitor: Monitor = None, larger_better: Optional[bool] = None,
                 only_state_dict: bool = True, save_folder: Union[str, Path, None] = None,
                 model_save_fn: Optional[Callable[[Path], None]] = None,
                 model_load_fn: Optional[Callable[[Path], None]] = None,
                 delete_after_train: bool = True) -> None:
        if (model_save_fn is None) != (model_load_fn is None):
            raise ValueError("Give both model_save_fn and model_load_fn, or neither.")
        self.tracker = MonitorTracker(monitor, larger_better)
        self.only_state_dict = only_state_dict
        self.save_folder = Path(save_folder) if save_folder is not None else None
        self.model_save_fn = model_save_fn
        self.model_load_fn = model_load_fn
        self.delete_after_train = delete_after_train
        self.best_batches: Optional[int] = None
        self._made_temporary = False

    def on_after_trainer_initialized(self, trainer: Any, driver: Any) -> None:
        self.tracker.bind(trainer, "LoadBestModelCallback")
        if self.save_folder is None:
            made_here = tempfile.mkdtemp(prefix="fastcore_best_") if driver.comm.is_global_zero() else None
            self.save_folder = Path(driver.comm.broadcast_object(made_here))
            self._made_temporary = True

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        value = self.tracker.value(results, trainer)
        if value is not None and self.tracker.update(value):
            self.best_batches = trainer.global_forward_batches
            trainer.save_model(self.save_folder, only_state_dict=self.only_state_dict,
                               model_save_fn=self.model_save_fn)

    def on_train_end(self, trainer: Any) -> None:
        if self.best_batches is None:
            logger.warning("LoadBestModelCallback: no evaluation gave a value for %r; keeping the last weights.",
                           self.tracker.monitor)
            self._drop_temporary(trainer.driver.comm)
            return
        logger.info("Loading the best model (%s=%.6g after %d batches).", self.tracker.monitor,
                    self.tracker.best, self.best_batches)
        # A whole pickled model (only_state_dict=False) is code: trusted because this callback wrote it
        # into its own folder (a checkpoint naming another folder is refused in on_load_checkpoint).
        trusted = {} if self.only_state_dict else {"weights_only": False}
        trainer.load_model(self.save_folder, only_state_dict=self.only_state_dict, model_load_fn=self.model_load_fn,
                           **trusted)
        if self.delete_after_train and trainer.driver.comm.is_global_zero():
            shutil.rmtree(self.save_folder, ignore_errors=True)

    def on_exception(self, trainer: Any, exception: BaseException) -> None:
        if self.best_batches is None:  # a best model stays, for the run's checkpoint to resume from
            self._drop_temporary(trainer.driver.comm)

    def _drop_temporary(self, comm: Any) -> None:
        """Remove the temporary folder this callback made, holding no best model (by rank 0, which made it).
        A ``save_folder`` the user gave is never removed unless a best model was written into it."""
        if self._made_temporary and comm.is_global_zero():
            shutil.rmtree(self.save_folder, ignore_errors=True)

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {"best": self.tracker.best, "best_batches": self.best_batches, "save_folder": str(self.save_folder)}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        if not states or not Path(states["save_folder"]).exists():
            return
        restored = Path(states["save_folder"])
        if not self._is_ours(restored):
            logger.warning("LoadBestModelCallback: the checkpoint names %s as its best-model folder, which is neither "
                           "this callback's save_folder nor one of its temporary folders; it is not used (nor "
                           "deleted), and the best model is tracked afresh.", restored)
            return
        self.tracker.best = states["best"]
        self.best_batches = states["best_batches"]
        if self._made_temporary and restored.resolve() != self.save_folder.resolve():
            shutil.rmtree(self.save_folder, ignore_errors=True)  # the empty one made for this run: unused now
        self.save_folder = restored

    def _is_ours(self, folder: Path) -> bool:
        """A folder this callback may read and delete: its own save_folder, or a temporary folder of
        the kind it makes (a checkpoint from elsewhere must not point it at other files)."""
        if self.save_folder is not None and not self._made_temporary:
            return folder.resolve() == self.save_folder.resolve()
        return (folder.name.startswith("fastcore_best_")
                and folder.resolve().parent == Path(tempfile.gettempdir()).resolve())
