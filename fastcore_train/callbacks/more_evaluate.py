"""``MoreEvaluateCallback``: evaluate extra datasets on their own schedule during training."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

from fastcore_train.callbacks.checkpoint_callback import CheckpointCallback
from fastcore_train.callbacks.metric_log import MetricLogCallback
from fastcore_train.callbacks.monitor_mixin import MonitorTracker
from fastcore_train.controllers.evaluator import Evaluator, format_results
from fastcore_train.controllers.monitor import Monitor
from fastcore_train.events.callback import Callback
from fastcore_train.log import logger

#: The ``kind`` under which metric-log callbacks record these results (CSV file, TensorBoard tag).
LOG_KIND = "more_evaluate"


class MoreEvaluateCallback(Callback):
    """Evaluate ``dataloaders`` with ``metrics`` besides the Trainer's own evaluation.

    When: every ``evaluate_every`` batches (> 0), every ``-evaluate_every`` epochs (< 0), when
    ``evaluate_every(trainer)`` is true (callable), or (``watch_monitor`` given, which then takes
    precedence; ``evaluate_every`` may then be None) each time the Trainer's own evaluation
    improves its ``watch_monitor`` result. ``topk`` > 0 keeps the ``topk`` best models (or
    checkpoints, ``save_object="checkpoint"`` or ``"trainer"``) by ``topk_monitor`` of these
    results under ``folder``; ``topk=-1`` saves after every one of these evaluations; 0 or None none. The results are logged, kept in
    ``last_results``, and passed to the trainer's metric-log callbacks (CSV, TensorBoard,
    curves) as ``more_evaluate``. Other keyword arguments go to the :class:`Evaluator`
    (``input_mapping``, ``output_mapping``, ``evaluate_batch_step_fn``, ...).
    """

    def __init__(self, dataloaders: Any, metrics: Any,
                 evaluate_every: Union[int, Callable[[Any], bool]] = -1,
                 watch_monitor: Monitor = None, watch_monitor_larger_better: bool = True,
                 evaluate_fn: Optional[str] = None, num_eval_sanity_batch: int = 2,
                 topk: int = 0, topk_monitor: Monitor = None, topk_larger_better: bool = True,
                 folder: Union[str, Path, None] = None, only_state_dict: bool = True,
                 save_object: str = "model", model_save_fn: Optional[Callable[[Path], None]] = None,
                 save_evaluate_results: bool = True, **evaluator_kwargs: Any) -> None:
        topk = 0 if topk is None else topk
        if evaluate_every is None and watch_monitor is not None:
            evaluate_every = -1  # not used: watch_monitor decides when to evaluate
        if not metrics:
            raise ValueError("MoreEvaluateCallback needs metrics={'name': Metric} to compute on its dataloaders.")
        if not callable(evaluate_every) and (isinstance(evaluate_every, bool) or not isinstance(evaluate_every, int)
                                             or evaluate_every == 0):
            raise ValueError(f"evaluate_every must be a non-zero int (>0: every n batches, <0: every n epochs) or "
                             f"callable(trainer) -> bool, got {evaluate_every!r}.")
        if isinstance(num_eval_sanity_batch, bool) or not isinstance(num_eval_sanity_batch, int) \
                or num_eval_sanity_batch < 0:
            raise ValueError(f"num_eval_sanity_batch must be an int >= 0, got {num_eval_sanity_batch!r}.")
        if topk and topk_monitor is None:
            raise ValueError("topk needs topk_monitor: the result of these evaluations that ranks (and names) the saves.")
        self.dataloaders = dataloaders
        self.metrics = metrics
        self.evaluate_every = evaluate_every
        self.watch = MonitorTracker(watch_monitor, watch_monitor_larger_better) if watch_monitor is not None else None
        if self.watch is not None:
            self.watch.owner = "MoreEvaluateCallback(watch_monitor=...)"
        self.evaluate_fn = evaluate_fn
        self.num_eval_sanity_batch = num_eval_sanity_batch
        self.evaluator_kwargs = evaluator_kwargs
        self.saver = CheckpointCallback(folder, topk=topk, monitor=topk_monitor, larger_better=topk_larger_better,
                                        only_state_dict=only_state_dict, model_save_fn=model_save_fn,
                                        save_object=save_object, save_evaluate_results=save_evaluate_results) \
            if topk else None
        self.evaluator: Optional[Evaluator] = None
        self.last_results: dict[str, Any] = {}
        self._reports = False

    @property
    def callback_name(self) -> str:
        return f"MoreEvaluateCallback#{sorted(self.metrics) if isinstance(self.metrics, dict) else self.metrics}"

    # ------------------------------------------------------------------ events
    def on_after_trainer_initialized(self, trainer: Any, driver: Any) -> None:
        self.evaluator = Evaluator(trainer.model, self.dataloaders, self.metrics, driver=driver,
                                   evaluate_fn=self.evaluate_fn, verbose=0, **self.evaluator_kwargs)
        self._reports = driver.comm.is_global_zero()
        if self.saver is not None:
            self.saver.on_after_trainer_initialized(trainer, driver)
            self.saver.tracker.owner = "MoreEvaluateCallback(topk_monitor=...)"

    def on_sanity_check_end(self, trainer: Any, sanity_check_res: dict) -> None:
        if self.num_eval_sanity_batch:
            with trainer._rng_preserved():
                self.evaluator.run(num_eval_batch_per_dl=self.num_eval_sanity_batch)
            trainer.driver.set_model_mode("train")

    def on_train_batch_end(self, trainer: Any) -> None:
        if self.watch is not None:
            return
        every = self.evaluate_every
        if callable(every):
            if every(trainer):
                self.evaluate(trainer)
        elif every > 0 and trainer.global_forward_batches % every == 0:
            self.evaluate(trainer)

    def on_train_epoch_end(self, trainer: Any) -> None:
        every = self.evaluate_every
        if self.watch is None and not callable(every) and every < 0 and trainer.cur_epoch_idx % -every == 0:
            self.evaluate(trainer)

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        if self.watch is None:
            return
        value = self.watch.value(results, trainer)
        if value is not None and self.watch.update(value):
            self.evaluate(trainer)

    def on_save_checkpoint(self, trainer: Any) -> dict:
        return {"watch_best": self.watch.best if self.watch else None,
                "saver": self.saver.on_save_checkpoint(trainer) if self.saver else None}

    def on_load_checkpoint(self, trainer: Any, states: Optional[dict]) -> None:
        if not states:
            return
        if self.watch is not None:
            self.watch.best = states.get("watch_best")
        if self.saver is not None:
            self.saver.on_load_checkpoint(trainer, states.get("saver"))

    # ------------------------------------------------------------------ work
    def evaluate(self, trainer: Any) -> dict[str, Any]:
        """Evaluate now (every rank must call this); returns the flat results."""
        with trainer._rng_preserved():
            results = self.evaluator.run()
        trainer.driver.set_model_mode("train")
        self.last_results = results
        if self._reports:
            logger.info("MoreEvaluateCallback at batch %d: %s", trainer.global_forward_batches,
                        format_results(results))
        for callback in trainer.callback_manager.callbacks:
            if isinstance(callback, MetricLogCallback):
                callback.log_values(trainer, LOG_KIND, results)
        if self.saver is not None:
            self.saver.on_evaluate_end(trainer, results)
        return results
