"""transformers' ``Trainer`` method names on our Trainer: ``train()`` and ``evaluate()``.

A transformers user types ``trainer.train()`` and ``trainer.evaluate()``; they run ``run()`` and
``run_evaluate()``, with transformers' argument names where they mean the same thing, and an
argument we cannot honour is an error naming what to do here instead. (``predict`` has one
meaning in both: see ``Trainer.predict``.)
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Union


class TransformersMethodsMixin:
    """Mixin for the :class:`~fastcore_train.controllers.trainer.Trainer`: transformers' method names."""

    run: Callable[..., Any]
    run_evaluate: Callable[[], dict[str, Any]]
    evaluator: Any

    def train(self, resume_from_checkpoint: Union[str, bool, None] = None, **run_kwargs: Any) -> Any:
        """transformers' ``Trainer.train()``: :meth:`run`, returning its ``TrainOutput``.

        ``resume_from_checkpoint`` is ``run(resume_from=...)``: a checkpoint folder, or ``True`` for
        the newest checkpoint of the Trainer's ``CheckpointCallback`` (``resume_from="auto"``).
        Other keyword arguments are :meth:`run`'s own (``num_eval_sanity_batch``, ...).
        """
        for name in ("trial", "ignore_keys_for_eval"):
            if name in run_kwargs:
                raise TypeError(f"train({name}=...) is transformers' hyperparameter search / evaluation option, which "
                                "this Trainer does not have; call trainer.run() (see docs/migration.md).")
        if resume_from_checkpoint is True:
            resume_from_checkpoint = "auto"
        if resume_from_checkpoint is not False and resume_from_checkpoint is not None:
            run_kwargs["resume_from"] = resume_from_checkpoint
        return self.run(**run_kwargs)

    def evaluate(self, eval_dataset: Any = None, ignore_keys: Optional[list[str]] = None,
                 metric_key_prefix: str = "eval") -> dict[str, Any]:
        """transformers' ``Trainer.evaluate()``: :meth:`run_evaluate` on the Trainer's
        ``evaluate_dataloaders``, returning its results (named ``<metric key>#<metric name>``,
        e.g. ``acc#acc``, and ``loss`` for the evaluation loss; see docs/metrics.md).

        Another dataset is evaluated with ``Evaluator(model, dataloader, metrics, driver=trainer.driver).run()``.
        """
        if eval_dataset is not None:
            raise TypeError("evaluate(eval_dataset) evaluates the Trainer's evaluate_dataloaders here; for another "
                            "dataloader use fastcore_train.Evaluator(model, dataloader, metrics, "
                            "driver=trainer.driver).run().")
        if ignore_keys is not None or metric_key_prefix != "eval":
            raise TypeError("evaluate(ignore_keys=..., metric_key_prefix=...) has no counterpart here: the results are "
                            "named '<key>#<metric name>' (see docs/metrics.md); return only the outputs your metrics "
                            "need from evaluate_step.")
        if self.evaluator is None:
            raise RuntimeError("evaluate() needs evaluate_dataloaders and metrics: pass them to the Trainer "
                               "(transformers' eval_dataset and compute_metrics).")
        return self.run_evaluate()
