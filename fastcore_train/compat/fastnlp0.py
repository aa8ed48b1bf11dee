"""fastNLP 0.x's ``DistTrainer``, kept with its parameters and meaning, run by our Trainer.

A 0.x script (``DistTrainer(train_data, model, optimizer, ...).train()`` started by
``torchrun`` or ``python -m torch.distributed.launch``) runs with its import changed. Each 0.x
parameter is turned into the Trainer's own (``batch_size_per_gpu`` builds the dataloader,
``update_every`` is ``accumulation_steps``, ``validate_every`` is ``evaluate_every``,
``metric_key`` is the monitor, ``save_path`` keeps the best model), and ``train()`` returns 0.x's
dict. Nothing here calls a framework: the dataloader comes from the model's backend.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from fastcore_train.callbacks.metric_log import current_epoch
from fastcore_train.callbacks.monitor_mixin import MonitorTracker
from fastcore_train.controllers.progress import RawTextCallback, TqdmCallback
from fastcore_train.controllers.trainer import Trainer
from fastcore_train.drivers.registry import backend_part, launch_environments
from fastcore_train.events.callback import Callback
from fastcore_train.log import logger
from fastcore_train.parallel.environment import SINGLE_PROCESS, RankFacts, detect_rank_facts
from fastcore_train.utils.param_call import ParamBinder

__all__ = ["DistTrainer", "get_local_rank", "nested_results"]

#: 0.x's ``fp16`` was an apex opt level; these ask for mixed precision, "" and "O0" for none.
_FP16_LEVELS = ("O1", "O2", "O3")
_ON_EXCEPTION = ("auto", "raise", "ignore")


def _launched() -> RankFacts:
    """This process's rank facts from whichever launcher started it (SINGLE_PROCESS when none did)."""
    return detect_rank_facts(launch_environments())


def get_local_rank() -> Optional[int]:
    """This process's local rank, as a launcher set it (torchrun's ``LOCAL_RANK``, also set by
    ``torch.distributed.launch``), or from the ``--local_rank``/``--local-rank`` argument that
    ``torch.distributed.launch`` passes without ``--use-env``; None when no launcher started this
    process (0.x raised instead: here one process trains alone)."""
    if "LOCAL_RANK" not in os.environ:
        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("--local_rank", "--local-rank", type=int, default=None)
        known, _ = parser.parse_known_args()
        if known.local_rank is not None:
            os.environ["LOCAL_RANK"] = str(known.local_rank)  # the launcher's rank facts read it
            return known.local_rank
    facts = _launched()
    return None if facts is SINGLE_PROCESS else facts.local_rank


def nested_results(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Our flat results (``acc#accuracy``) as 0.x's ``{metric name: {key: value}}``."""
    nested: dict[str, dict[str, Any]] = {}
    for name, value in results.items():
        key, _, metric = name.partition("#")
        nested.setdefault(metric or key, {})[key] = value
    return nested


def _fp16(fp16: Union[str, bool, None]) -> bool:
    if fp16 in ("", None, False, "O0"):
        return False
    if fp16 is True or fp16 in _FP16_LEVELS:
        return True
    raise ValueError(f"fp16 must be '' (off) or an opt level {_FP16_LEVELS} (mixed precision on), got {fp16!r}.")


def _monitor(metric_key: Optional[str]) -> tuple[Optional[str], bool]:
    """0.x's ``metric_key``: a result key, ``-`` in front when smaller is better."""
    if metric_key is None:
        return None, True
    if not isinstance(metric_key, str) or metric_key in ("", "-"):
        raise ValueError(f"metric_key must be a result key such as 'acc' or '-ppl', got {metric_key!r}.")
    return (metric_key[1:], False) if metric_key.startswith("-") else (metric_key, True)


def _metrics(metrics: Any) -> dict[str, Any]:
    """0.x took one metric or a list; its results were keyed by each metric's class name."""
    if isinstance(metrics, dict):
        return dict(metrics)
    named: dict[str, Any] = {}
    for metric in metrics if isinstance(metrics, (list, tuple)) else [metrics]:
        base = getattr(metric, "__name__", type(metric).__name__)
        name, count = base, 1
        while name in named:
            count += 1
            name = f"{base}{count}"
        named[name] = metric
    return named


def _device(device: Any, local_rank: Optional[int]) -> Any:
    """0.x's ``device`` (``auto``, ``cuda``, ``cpu``) as the Trainer's ``device=``."""
    if device not in ("auto", "cuda", "cpu"):
        raise ValueError(f"device must be 'auto', 'cuda' or 'cpu' (as in fastNLP 0.x), got {device!r}.")
    if device == "cuda":
        return local_rank or 0
    if device == "cpu":
        return "cpu"
    return None if local_rank is not None else "cpu"  # a launched rank's own device; alone: the CPU


class _BestResults(Callback):
    """Tracks 0.x's best evaluation (``best_eval``, ``best_epoch``, ``best_step``) and keeps the
    best model in ``folder`` when one is given."""

    def __init__(self, metric_key: Optional[str], folder: Optional[Path]) -> None:
        self.monitor, larger_better = _monitor(metric_key)
        self.tracker: Optional[MonitorTracker] = None
        self.larger_better = larger_better
        self.folder = folder
        self.best_eval: Optional[dict[str, dict[str, Any]]] = None
        self.best_epoch: Optional[int] = None
        self.best_step: Optional[int] = None

    @property
    def callback_name(self) -> str:
        return "fastnlp0_best_results"

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        if self.tracker is None:  # 0.x: no metric_key means the first key of the first metric
            monitor = self.monitor if self.monitor is not None else next(iter(results), None)
            if monitor is None:
                return
            self.tracker = MonitorTracker(monitor, self.larger_better)
            self.tracker.owner = "DistTrainer(metric_key=...)"
        value = self.tracker.value(results, trainer)
        if value is None or not self.tracker.update(value):
            return
        self.best_eval = nested_results(dict(results))
        self.best_epoch = current_epoch(trainer)
        self.best_step = trainer.global_forward_batches
        if self.folder is not None:
            trainer.save_model(self.folder)


class _LossFunction:
    """The batch step when ``loss`` is a function: it gets its parameters by name from the model's
    output dict, then from the batch (0.x's ``LossFunc``/``_build_args`` matching)."""

    def __init__(self, loss: Callable[..., Any]) -> None:
        self.binder = ParamBinder(loss)

    def __call__(self, trainer: Trainer, batch: Any) -> None:
        outputs = trainer.train_step(batch)
        if not isinstance(outputs, dict):
            raise TypeError(f"With loss= given, the model's forward must return a dict (as in fastNLP 0.x), "
                            f"got {type(outputs).__name__}.")
        trainer.backward({"loss": self.binder.call_with(outputs, batch)})
        trainer.step()
        trainer.zero_grad()


class DistTrainer:
    """fastNLP 0.x's distributed trainer: train ``model`` on the dataset ``train_data`` on every
    rank a launcher started (``torchrun`` or ``torch.distributed.launch``), or alone.

    ``loss``: None reads ``loss`` from the model's output dict (0.x's ``LossInForward``); a
    function gets its parameters by name from the outputs and the batch. ``metrics``: our
    metrics or metric functions (one, a list, or a dict by name). ``metric_key``: the result key
    that picks the best evaluation, ``-key`` when smaller is better. ``save_path``: a folder for
    the best model. Other keyword arguments go to the :class:`~fastcore_train.Trainer`.
    """

    def __init__(self, train_data: Any, model: Any, optimizer: Any = None, loss: Optional[Callable[..., Any]] = None,
                 callbacks_all: Optional[Sequence[Callback]] = None,
                 callbacks_master: Optional[Sequence[Callback]] = None, batch_size_per_gpu: int = 8,
                 n_epochs: int = 1, num_workers: int = 1, drop_last: bool = False, dev_data: Any = None,
                 metrics: Any = None, metric_key: Optional[str] = None, update_every: int = 1,
                 print_every: int = 10, validate_every: int = -1, save_path: Union[str, Path, None] = None,
                 device: str = "auto", fp16: Union[str, bool] = "", use_tqdm: bool = True,
                 local_rank: Optional[int] = None, **trainer_kwargs: Any) -> None:
        if optimizer is None:
            raise ValueError("DistTrainer needs an optimizer: fastNLP 0.x's default was "
                             "Adam(model.parameters(), lr=4e-3); build it and pass optimizer=.")
        if local_rank is not None:
            os.environ.setdefault("LOCAL_RANK", str(local_rank))
        self.local_rank = get_local_rank() if local_rank is None else int(local_rank)
        self.rank = _launched().rank
        self.model = model
        self.optimizer = optimizer
        self.train_data = train_data
        self.batch_size_per_gpu = int(batch_size_per_gpu)
        self.n_epochs = int(n_epochs)
        self.update_every = int(update_every)
        self.validate_every = int(validate_every)
        self.metric_key = metric_key
        self.save_path = None if save_path is None else Path(save_path)
        builder = getattr(backend_part(model, "dataloader"), "dataloader_from_dataset", None)
        if builder is None:
            raise TypeError(f"DistTrainer cannot build a dataloader for a {type(model).__name__} model's framework "
                            "from a dataset; use the Trainer with your framework's dataloader.")

        def loader(dataset: Any, shuffle: bool, last: bool) -> Any:
            return builder(dataset, self.batch_size_per_gpu, shuffle, last, int(num_workers))

        evaluates = dev_data is not None and bool(metrics)
        folder = None
        if self.save_path is not None and evaluates:
            folder = self.save_path / f"best_{type(model).__name__}_{metric_key}"
        self._best = _BestResults(metric_key, folder)
        callbacks = list(callbacks_all or ())
        if self.rank == 0:
            callbacks += list(callbacks_master or ())
        if evaluates:
            callbacks.append(self._best)
        progress = (TqdmCallback if use_tqdm else RawTextCallback)(print_every=int(print_every))
        monitor, larger_better = _monitor(metric_key)
        if self.validate_every > 0:
            evaluate_every: Any = self.validate_every
        elif self.validate_every < 0:
            evaluate_every = -1
        else:
            evaluate_every = lambda trainer: False  # noqa: E731  (0.x: 0 never validates)
        self.trainer = Trainer(
            model, loader(train_data, True, drop_last), optimizer, device=_device(device, self.local_rank),
            n_epochs=self.n_epochs, evaluate_dataloaders=loader(dev_data, False, False) if evaluates else None,
            metrics=_metrics(metrics) if evaluates else None, evaluate_every=evaluate_every,
            accumulation_steps=self.update_every, fp16=_fp16(fp16), monitor=monitor, larger_better=larger_better,
            callbacks=callbacks, batch_step_fn=None if loss is None else _LossFunction(loss),
            progress_bar=progress, **trainer_kwargs)
        self.world_size = self.trainer.driver.comm.world_size

    @property
    def is_master(self) -> bool:
        """Whether this is rank 0."""
        return self.rank == 0

    def train(self, load_best_model: bool = True, on_exception: str = "auto") -> dict[str, Any]:
        """Train; return 0.x's dict: ``seconds``, and with ``dev_data`` and ``metrics`` also
        ``best_eval`` (``{metric: {key: value}}``), ``best_epoch``, ``best_step`` (batches).

        ``load_best_model``: with ``save_path``, end with the best model's weights.
        ``on_exception``: ``"raise"``, ``"ignore"`` (log it and return), or ``"auto"`` (ignore
        ``KeyboardInterrupt`` only).
        """
        if on_exception not in _ON_EXCEPTION:
            raise ValueError(f"on_exception must be one of {_ON_EXCEPTION}, got {on_exception!r}.")
        results: dict[str, Any] = {}
        if self.n_epochs <= 0:
            logger.info("Training epoch is %d, nothing was done.", self.n_epochs)
            results["seconds"] = 0.0
            return results
        start = time.time()
        try:
            self.trainer.run(num_eval_sanity_batch=0)
        except BaseException as error:  # noqa: B036  (0.x's on_exception covers KeyboardInterrupt too)
            ignored = on_exception == "ignore" or (on_exception == "auto" and isinstance(error, KeyboardInterrupt))
            if not ignored:
                raise
            logger.info("Caught %s, ignored (on_exception=%r).", type(error).__name__, on_exception)
        results["seconds"] = round(time.time() - start, 2)
        best = self._best
        if best.best_eval is not None:
            results.update(best_eval=best.best_eval, best_epoch=best.best_epoch, best_step=best.best_step)
            if load_best_model and best.folder is not None:
                self.trainer.load_model(best.folder)
        return results
