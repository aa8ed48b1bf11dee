"""``CheckpointCallback``: save checkpoints (or models) on a schedule, the last one, and the top k."""
from __future__ import annotations

import json
import math
import re
import signal
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from fastcore_train.callbacks.monitor_mixin import MonitorTracker
from fastcore_train.callbacks.metric_log import current_epoch
from fastcore_train.callbacks.run_folder import new_run_folder
from fastcore_train.checkpoint.run_lock import RunFolderBusyError, acquire_run_folder, release_run_folder
from fastcore_train.checkpoint.user_files import backend_files, remove_checkpoint
from fastcore_train.controllers.interrupts import SaveGuard
from fastcore_train.controllers.monitor import Monitor
from fastcore_train.controllers.run_guard import TrainingRequeued
from fastcore_train.events.callback import Callback
from fastcore_train.log import logger
from fastcore_train.utils.atomic import blocking_file

EVALUATE_RESULTS_FILE = "evaluate_results.json"
#: ``"trainer"`` is fastNLP 1.0's name for ``"checkpoint"`` (model plus everything needed to resume).
SAVE_OBJECTS = ("model", "checkpoint", "trainer")
#: The name of a top-k folder (see :class:`CheckpointCallback`).
_TOP_K_NAME = re.compile(r"^epoch_(?P<epoch>\d+)-batch_(?P<batch>\d+)-.+_[^_]+$")


def _requeue_signals(requeue_signal: Union[int, Sequence[int], None], save_object: str) -> tuple[int, ...]:
    """``requeue_signal`` checked: signal numbers this process can catch, for a resumable checkpoint."""
    if requeue_signal is None:
        return ()
    given = tuple(requeue_signal) if isinstance(requeue_signal, (list, tuple, set)) else (requeue_signal,)
    numbers = []
    for value in given:
        try:
            number = signal.Signals(value)
        except (ValueError, TypeError):
            raise ValueError(f"requeue_signal must be a signal number such as signal.SIGUSR1, got {value!r}.") from None
        if number in (getattr(signal, "SIGKILL", None), getattr(signal, "SIGSTOP", None)):
            raise ValueError(f"requeue_signal={number.name} cannot be caught by any process; use the signal your "
                             "scheduler sends ahead of the kill (SLURM: --signal=USR1@90 and signal.SIGUSR1).")
        numbers.append(int(number))
    if save_object != "checkpoint":
        raise ValueError("requeue_signal saves a checkpoint to resume from after the requeue: it needs "
                         "save_object='checkpoint'.")
    return tuple(numbers)


class CheckpointCallback(Callback):
    """Save to ``folder/<run timestamp>/<name>`` where name is

    - ``epoch_{e}-batch_{b}`` every ``every_n_epochs`` epochs / ``every_n_batches`` batches (``e``
      counts from 1: the epoch batch ``b`` belongs to, mid-epoch as at its end),
    - ``last`` at the end of every epoch when ``last=True`` (replaced each time), and where a run
      stopped inside an epoch (``n_batches``, ``stop_training()``): that checkpoint resumes its rest,
    - ``epoch_{e}-batch_{b}-{monitor}_{value}`` for the ``topk`` best evaluations (others deleted),
      with the evaluation results beside it in ``evaluate_results.json``,
    - ``exception_{Name}`` when training raises one of ``on_exceptions``.

    ``requeue_signal`` (a signal number or several, e.g. ``signal.SIGUSR1`` for SLURM's
    ``--signal=USR1@90``, ``signal.SIGTERM`` for Kubernetes; checkpoints only): when one arrives
    on any rank, every rank stops after the same batch (the next stop decision), this callback saves
    ``epoch_{e}-batch_{b}`` there, and the process exits with status
    :data:`~fastcore_train.controllers.run_guard.REQUEUE_EXIT_CODE` (143) for the scheduler to start
    the job again, which ``run(resume_from="auto")`` then resumes.

    ``topk``: 0 or None saves no evaluation, k > 0 keeps the k best, a negative number (-1) saves
    after every evaluation and keeps them all. ``save_object="checkpoint"`` (or ``"trainer"``,
    fastNLP 1.0's name) writes resumable checkpoints (``Trainer.save_checkpoint``); ``"model"``
    (fastNLP 1.0's default) writes the model only (``Trainer.save_model``).

    ``async_save=True`` (checkpoints only) writes each checkpoint in the background while training
    continues (``Trainer.save_checkpoint(..., blocking=False)``): the state is copied to host memory
    at the save point, the folder appears complete once written, and the run waits for the last one
    before it returns.
    """

    def __init__(self, folder: Union[str, Path, None] = None, every_n_epochs: Optional[int] = None,
                 every_n_batches: Optional[int] = None, last: bool = False, topk: int = 0,
                 on_exceptions: Union[type, Sequence[type], None] = None, monitor: Monitor = None,
                 larger_better: Optional[bool] = None, only_state_dict: bool = True,
                 model_save_fn: Optional[Callable[[Path], None]] = None, save_object: str = "model",
                 save_evaluate_results: bool = True, async_save: bool = False,
                 requeue_signal: Union[int, Sequence[int], None] = None) -> None:
        topk = 0 if topk is None else topk
        for name, value in (("every_n_epochs", every_n_epochs), ("every_n_batches", every_n_batches)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}.")
        if isinstance(topk, bool) or not isinstance(topk, int):
            raise ValueError(f"topk must be an int (k > 0: keep the k best; -1: keep every evaluation; 0 or None: "
                             f"none), got {topk!r}.")
        if save_object not in SAVE_OBJECTS:
            raise ValueError(f"save_object must be 'model', 'checkpoint' or 'trainer' (the same as 'checkpoint'), "
                             f"got {save_object!r}.")
        save_object = "checkpoint" if save_object == "trainer" else save_object
        if async_save and (save_object != "checkpoint" or model_save_fn is not None or not only_state_dict):
            raise ValueError("async_save=True writes checkpoints of the model's state dict in the background: it needs "
                             "save_object='checkpoint', only_state_dict=True and no model_save_fn (which writes the live "
                             "model). Drop async_save, or those options.")
        self.async_save = async_save
        self.requeue_signals = _requeue_signals(requeue_signal, save_object)
        self.folder = Path(folder if folder is not None else "checkpoints")
        self.every_n_epochs = every_n_epochs
        self.every_n_batches = every_n_batches
        self.last = last
        self.topk = topk
        self.on_exceptions = tuple(on_exceptions) if isinstance(on_exceptions, (list, tuple)) else \
            ((on_exceptions,) if on_exceptions is not None else ())
        self.tracker = MonitorTracker(monitor, larger_better) if topk else None
        self.only_state_dict = only_state_dict
        self.model_save_fn = model_save_fn
        self.save_object = save_object
        self.save_evaluate_results = save_evaluate_results
        self.run_folder: Optional[Path] = None
        self.topk_saved: list[tuple[float, str]] = []  # (value, folder name), best first
        self._last_after_evaluation = False
        self._holds_run_folder = False
        self._refused = False
        #: the files a model_save_fn wrote into each saved model folder (save_object="model"): its own
        self._written_by_save_fn: dict[str, list[str]] = {}

    @property
    def callback_name(self) -> str:
        return f"CheckpointCallback#{self.folder}#{self.save_object}#{self.topk}"

    # ------------------------------------------------------------------ events
    def on_after_trainer_initialized(self, trainer: Any, driver: Any) -> None:
        if self.tracker is not None:
            self.tracker.bind(trainer, "CheckpointCallback(topk=...)")
        if self.async_save and not driver.io.supports_snapshot:
            raise ValueError(f"CheckpointCallback(async_save=True): {type(driver).__name__} cannot snapshot its state "
                             "to host memory (its saving is collective, as for fairscale and deepspeed, or its "
                             "backend has no snapshot.py); pass async_save=False.")
        blocker = blocking_file(self.folder)
        if blocker is not None:  # found now, not at the first save many batches in
            raise ValueError(f"CheckpointCallback cannot write to {str(self.folder)!r}: {str(blocker)!r} "
                             "is a file, not a folder. Pass a folder path (new or existing).")
        self.run_folder = new_run_folder(self.folder, driver, trainer)

    def on_train_begin(self, trainer: Any) -> None:
        """Take the run folder for this run (:mod:`~fastcore_train.checkpoint.run_lock`): a second run
        writing into it (resume_from="auto" started twice) is refused here, before it trains."""
        comm = trainer.driver.comm
        problem = acquire_run_folder(self.run_folder, trainer) if comm.is_global_zero() else None
        problem = comm.broadcast_object(problem)  # every rank stops alike
        self._refused = problem is not None
        if problem is not None:
            raise RunFolderBusyError(problem)
        self._holds_run_folder = comm.is_global_zero()

    def _release_run_folder(self, trainer: Any) -> None:
        if self._holds_run_folder:
            self._holds_run_folder = False
            folder = self.run_folder
            trainer.after_checkpoint_written(lambda: release_run_folder(folder, trainer))

    def on_train_batch_end(self, trainer: Any) -> None:
        if self.every_n_batches and trainer.global_forward_batches % self.every_n_batches == 0:
            self._save(trainer, self._position(trainer))

    def on_train_epoch_end(self, trainer: Any) -> None:
        if self.every_n_epochs and trainer.cur_epoch_idx % self.every_n_epochs == 0:
            self._save(trainer, self._position(trainer))
        if self.last:
            if self.tracker is not None and trainer.evaluates_at_epoch_end():
                self._last_after_evaluation = True  # so that `last` holds this epoch's top-k result too
            else:
                self._save(trainer, "last")

    def on_train_end(self, trainer: Any) -> None:
        if self.last and trainer.batch_idx_in_epoch:  # the run stopped inside an epoch, which stays open
            self._save(trainer, "last")
        self._release_run_folder(trainer)

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        if self.tracker is not None:
            self._keep_if_top_k(trainer, results)
        if self._last_after_evaluation:
            self._last_after_evaluation = False
            self._save(trainer, "last")

    def _keep_if_top_k(self, trainer: Any, results: dict) -> None:
        """Save this evaluation when it is among the k best. The list saved with it (and with every
        later checkpoint) already holds it, so a resume from any of them sees one coherent set."""
        value = self.tracker.value(results, trainer)
        if value is None:
            return
        keep_all = self.topk < 0
        worst_kept = self.topk_saved[-1][0] if not keep_all and len(self.topk_saved) >= self.topk else None
        if worst_kept is not None and not self._better(value, worst_kept):
            return
        name = f"{self._position(trainer)}-{self.tracker.key(results)}_{value:.6g}".replace("#", "-")
        before = list(self.topk_saved)
        ranked = sorted([item for item in self.topk_saved if item[1] != name] + [(value, name)],
                        key=lambda item: item[0], reverse=self.tracker.larger_better)
        kept, dropped = (ranked, []) if keep_all else (ranked[:self.topk], ranked[self.topk:])
        self.topk_saved = kept
        self.tracker.best = kept[0][0]
        try:
            self._save(trainer, name, results)
        except BaseException:
            self.topk_saved = before  # not saved: not kept
            self.tracker.best = before[0][0] if before else None
            raise
        self._delete_when_written(trainer, [folder for _, folder in dropped])

    def _delete_when_written(self, trainer: Any, names: Sequence[str]) -> None:
        """Delete dropped top-k folders once the better one is on disk: their own files only, so that a
        file of the user's in one (an exported model.onnx) stays, named in a warning."""
        if trainer.driver.comm.is_global_zero():
            known = [*backend_files(trainer.driver.io.model_file_suffix), EVALUATE_RESULTS_FILE]
            for name in names:
                written = self._written_by_save_fn.pop(name, [])
                trainer.after_checkpoint_written(
                    lambda path=self.run_folder / name, own=known + written: remove_checkpoint(path, own))

    def on_exception(self, trainer: Any, exception: BaseException) -> None:
        if self._refused:  # another run writes this run folder: nothing of this one goes there
            return
        try:
            self._save_on_exception(trainer, exception)
        finally:
            self._release_run_folder(trainer)

    def _save_on_exception(self, trainer: Any, exception: BaseException) -> None:
        if self.requeue_signals and isinstance(exception, TrainingRequeued):
            self._save(trainer, self._position(trainer), exception_checkpoint=True)  # resumable by resume_from="auto"
        elif self.on_exceptions and isinstance(exception, self.on_exceptions):
            self._save(trainer, f"exception_{type(exception).__name__}", exception_checkpoint=True)

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {"topk_saved": list(self.topk_saved), "run_folder": str(self.run_folder),
                "best": self.tracker.best if self.tracker else None}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        if not states:
            return
        # Keep writing where the interrupted run wrote, so top-k stays one coherent set.
        self.run_folder = Path(states["run_folder"])
        self.topk_saved = [tuple(item) for item in states["topk_saved"]]
        if self.tracker is not None:
            self.tracker.best = states["best"]
            self._adopt_unlisted_top_k(trainer)

    def _adopt_unlisted_top_k(self, trainer: Any) -> None:
        """Top-k folders of this run written up to the resumed point but missing from the loaded
        list (checkpoints written before the list included them, e.g. an older ``last``) join it
        again, and the set is trimmed back to k; folders of later points are left to be replaced."""
        comm = trainer.driver.comm
        found = self._unlisted_top_k(trainer) if comm.is_global_zero() else None
        found = comm.broadcast_object(found)  # every rank keeps the same list (it decides collective saves)
        if not found:
            return
        ranked = sorted(self.topk_saved + found, key=lambda item: item[0], reverse=self.tracker.larger_better)
        kept, dropped = (ranked, []) if self.topk < 0 else (ranked[:self.topk], ranked[self.topk:])
        logger.warning("CheckpointCallback: top-k checkpoint(s) %s in %s were missing from the resumed checkpoint's "
                       "list (written before it recorded them); they are counted again%s.",
                       ", ".join(name for _, name in found), str(self.run_folder),
                       f", and {', '.join(name for _, name in dropped)} dropped to keep {self.topk}" if dropped else "")
        self.topk_saved = kept
        self.tracker.best = kept[0][0]
        self._delete_when_written(trainer, [name for _, name in dropped])

    def _unlisted_top_k(self, trainer: Any) -> list[tuple[float, str]]:
        listed = {name for _, name in self.topk_saved}
        found: list[tuple[float, str]] = []
        for folder in sorted(self.run_folder.iterdir()) if self.run_folder.is_dir() else ():
            match = _TOP_K_NAME.match(folder.name)
            results_file = folder / EVALUATE_RESULTS_FILE
            if match is None or folder.name in listed or not results_file.is_file() \
                    or int(match["batch"]) > trainer.global_forward_batches:
                continue
            try:
                value = self.tracker.value(json.loads(results_file.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
            if value is not None and math.isfinite(value):
                found.append((value, folder.name))
        return found

    # ------------------------------------------------------------------ helpers
    def _better(self, value: float, other: float) -> bool:
        return value > other if self.tracker.larger_better else value < other

    @staticmethod
    def _position(trainer: Any) -> str:
        """``epoch_{e}-batch_{b}``: e is the 1-based epoch the last batch belongs to, for every schedule."""
        return f"epoch_{current_epoch(trainer)}-batch_{trainer.global_forward_batches}"

    def _save(self, trainer: Any, name: str, results: Optional[dict] = None,
              exception_checkpoint: bool = False) -> None:
        # Ctrl-C during the write waits for it (a second press abandons it): controllers/interrupts.py
        with SaveGuard(repr(str(self.run_folder / name)), stop_after=not exception_checkpoint):
            self._write(trainer, name, results)

    def _write(self, trainer: Any, name: str, results: Optional[dict] = None) -> None:
        target = self.run_folder / name
        extra = {EVALUATE_RESULTS_FILE: results} if results is not None and self.save_evaluate_results else None
        if self.save_object == "checkpoint":
            trainer.save_checkpoint(target, only_state_dict=self.only_state_dict,
                                    model_save_fn=self.model_save_fn, extra_json=extra, blocking=not self.async_save)
        else:
            fresh = not target.exists()
            trainer.save_model(target, only_state_dict=self.only_state_dict, model_save_fn=self.model_save_fn)
            if self.model_save_fn is not None and fresh and trainer.driver.comm.is_global_zero():
                self._written_by_save_fn[name] = [path.relative_to(target).as_posix()
                                                  for path in target.rglob("*") if path.is_file()]
            if extra and trainer.driver.comm.is_global_zero():
                from fastcore_train.checkpoint import write_json
                write_json(target / EVALUATE_RESULTS_FILE, results)
