"""The Evaluator: runs a model over one or more dataloaders and computes metrics.

Usable alone (it builds its own driver) and inside the Trainer (which hands it its driver).
Results are flat: ``"indicator#metric_name#dataloader_name"``, e.g. ``"acc#acc#dev"``; the
dataloader part is left out when a single unnamed dataloader is evaluated. When the evaluation
outputs hold a ``loss``, its mean over the samples is the result ``"loss"`` (``"loss#dev"``), see
:mod:`~fastcore_train.controllers.eval_loss`.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Optional, Union

from fastcore_train.controllers.adapted_loaders import AdaptedLoaders
from fastcore_train.controllers.batch_io import ModelCaller, outputs_as_mapping
from fastcore_train.controllers.eval_loss import LOSS_KEY, EvalLoss, mean_loss
from fastcore_train.controllers.options import split_backend_kwargs
from fastcore_train.drivers.choose import choose_driver
from fastcore_train.log import logger, set_rank
from fastcore_train.drivers.driver import Driver
from fastcore_train.controllers.evaluator_metrics import EvaluatorMetric, normalize_metrics
from fastcore_train.controllers.predict import Predictor
from fastcore_train.samplers.adapt import make_unrepeated_dataloader, ranks_share_batches, whole_copy
from fastcore_train.utils.param_call import apply_mapping

EvaluateBatchStepFn = Callable[["Evaluator", Any], None]


def default_evaluate_batch_step(evaluator: "Evaluator", batch: Any) -> None:
    """Forward the batch and feed outputs (and the batch, for targets) to every metric."""
    outputs = evaluator.evaluate_step(batch)
    evaluator.update(batch, outputs)


def _normalize_dataloaders(dataloaders: Any) -> dict[Optional[str], Any]:
    if dataloaders is None:
        raise ValueError("Evaluator needs dataloaders: one dataloader or a dict {name: dataloader}.")
    if isinstance(dataloaders, Mapping):
        if not dataloaders:
            raise ValueError("Evaluator got an empty dict of dataloaders.")
        return {str(name): dl for name, dl in dataloaders.items()}
    return {None: dataloaders}


class EvaluateResults(dict):
    """The flat results of one evaluation (a plain ``dict`` to read), plus ``no_data``.

    ``no_data`` names the dataloaders that gave no batch: they have no entry at all (not 0.0),
    so a monitor that would have read one of them finds no value for this evaluation.
    """

    def __init__(self, *args: Any, no_data: tuple[Optional[str], ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.no_data = tuple(no_data)


def _dataloader_label(name: Optional[str]) -> str:
    return "The evaluate dataloader" if name is None else f"Evaluate dataloader {name!r}"


def result_key(indicator: str, metric_name: str, dataloader_name: Optional[str]) -> str:
    return "#".join(part for part in (indicator, metric_name, dataloader_name) if part)


class Evaluator:
    """Evaluate ``model`` on ``dataloaders`` with ``metrics``; see the module docstring for keys."""

    def __init__(self, model: Any, dataloaders: Any, metrics: Any = None,
                 driver: Union[str, Driver] = "auto", device: Any = "cpu",
                 evaluate_batch_step_fn: Optional[EvaluateBatchStepFn] = None,
                 evaluate_fn: Optional[str] = None, input_mapping: Any = None,
                 output_mapping: Any = None, model_wo_auto_param_call: bool = False,
                 fp16: bool = False, verbose: int = 1, **kwargs: Any) -> None:
        backend_kwargs, options = split_backend_kwargs(kwargs, allowed={"model_use_eval_mode", "progress_bar",
                                                                        "use_dist_sampler"})
        self.driver = choose_driver(model, driver, device, fp16=fp16, **backend_kwargs)
        self.driver.ensure_setup()
        set_rank(self.driver.comm.rank, self.driver.comm.world_size)
        self.dataloaders = _normalize_dataloaders(dataloaders)
        self._given_dataloaders = dict(self.dataloaders)  # before any split, for predict()
        for name, dataloader in self.dataloaders.items():
            self.driver.data.check(dataloader, f"evaluate dataloader {name or ''}".strip())
        # Distributed: each rank evaluates a disjoint share and metrics are aggregated across ranks.
        self._split: dict[Optional[str], bool] = {name: False for name in self.dataloaders}
        split = options.get("use_dist_sampler")
        splits = (self.driver.comm.is_distributed() and (split is None or bool(split))
                  and not ranks_share_batches(self.driver))
        #: The loaders built here (copies of the given ones), released when a run ends (:meth:`run`).
        self.adapted_loaders = AdaptedLoaders(self.driver.data)
        for name, dataloader in self.dataloaders.items():
            if splits:
                self.dataloaders[name], self._split[name] = make_unrepeated_dataloader(self.driver, dataloader)
            elif self.driver.data.copy_for_evaluation:  # the framework's own loader must not serve it (jittor)
                self.dataloaders[name] = whole_copy(self.driver, dataloader)
            self.adapted_loaders.add(self.dataloaders[name], dataloader)
        self.metrics = normalize_metrics(metrics)
        if not self.metrics and evaluate_batch_step_fn is None:
            raise ValueError("Evaluator needs metrics (a dict {name: Metric}) or an evaluate_batch_step_fn.")
        if evaluate_batch_step_fn is not None and not callable(evaluate_batch_step_fn):
            raise TypeError("evaluate_batch_step_fn must be callable(evaluator, batch).")
        self.evaluate_batch_step_fn = evaluate_batch_step_fn or default_evaluate_batch_step
        fn, signature_fn = self.driver.get_model_call_fn(evaluate_fn or "evaluate_step", for_training=False)
        self._call_model = ModelCaller(fn, signature_fn, model_wo_auto_param_call)
        self.input_mapping = input_mapping
        self.output_mapping = output_mapping
        self.verbose = verbose
        self.model_use_eval_mode = options.get("model_use_eval_mode", True)
        self.model_wo_auto_param_call = model_wo_auto_param_call
        self._metrics = {name: EvaluatorMetric(name, metric, self.driver) for name, metric in self.metrics.items()}
        for entry in self._metrics.values():
            entry.check_split(any(self._split.values()))
        self.current_dataloader_name: Optional[str] = None
        self._loss = EvalLoss(self.driver.data.to_numpy)

    # ------------------------------------------------------------------ per batch
    def evaluate_step(self, batch: Any) -> Any:
        """Run the evaluation forward (``evaluate_step`` or forward) and apply output_mapping."""
        with self.driver.precision.forward_context():
            outputs = self._call_model(batch)
        return apply_mapping(self.output_mapping, outputs)

    def update(self, batch: Any, outputs: Any) -> None:
        """Feed each metric's ``update`` the entries of ``outputs`` (then ``batch``) it asks for."""
        outputs = outputs_as_mapping(outputs, "The evaluation step")
        loss = outputs.get(LOSS_KEY)
        if loss is not None:
            self._loss.add(loss, batch, outputs)
        sources = (outputs, batch) if isinstance(batch, Mapping) else (outputs,)
        for entry in self._metrics.values():
            entry.binder.call_with(*sources)

    # ------------------------------------------------------------------ whole run
    def run(self, num_eval_batch_per_dl: int = -1) -> dict[str, Any]:
        """Evaluate every dataloader (at most ``num_eval_batch_per_dl`` batches each, -1 for all).

        Returns :class:`EvaluateResults`; a dataloader that gave no batch (on every rank) has no
        entry in them, is named in their ``no_data`` and in a warning, and is not reported as 0.
        The loaders built from the given ones are released when it ends (their worker processes
        stop), or when the enclosing ``Trainer.run`` does.
        """
        if not isinstance(num_eval_batch_per_dl, int) or num_eval_batch_per_dl == 0 or num_eval_batch_per_dl < -1:
            raise ValueError(f"num_eval_batch_per_dl must be -1 (all) or a positive int, got {num_eval_batch_per_dl!r}.")
        with self.adapted_loaders.held():
            return self._run(num_eval_batch_per_dl)

    def _run(self, num_eval_batch_per_dl: int) -> dict[str, Any]:
        driver = self.driver
        if self.model_use_eval_mode:
            driver.set_model_mode("eval")
        results = EvaluateResults()
        no_data: list[Optional[str]] = []
        heartbeats = driver.comm.heartbeats  # in a watched run: evaluation batches show this rank is alive
        for name, dataloader in self.dataloaders.items():
            self.current_dataloader_name = name
            self.reset()
            evaluated = 0
            with driver.evaluate_context():
                for index, batch in enumerate(dataloader):
                    if index == num_eval_batch_per_dl:
                        break
                    batch = apply_mapping(self.input_mapping, batch)
                    batch = driver.data.to_device(batch)
                    self.evaluate_batch_step_fn(self, batch)
                    evaluated += 1
                    if heartbeats is not None:
                        heartbeats.touch()
            loss_shares = [self._loss.share()]
            if self._split[name]:  # each rank saw a share: the dataloader is empty only if every share is
                shares = driver.comm.all_gather_object((evaluated, self._loss.share()))
                evaluated = sum(share[0] for share in shares)
                loss_shares = [share[1] for share in shares]
            if evaluated == 0:
                no_data.append(name)
                logger.warning(
                    "%s gave no batch: it has no results in this evaluation (its metrics are left out, not "
                    "reported as 0), and monitors reading them see no value. Check that its dataset is not "
                    "empty; a generator or other one-shot iterable is used up after one pass.",
                    _dataloader_label(name))
                continue
            results.update(self.get_metric(name, aggregate=self._split[name]))
            self._add_loss(results, name, mean_loss(loss_shares))
        results.no_data = tuple(no_data)
        self.current_dataloader_name = None
        self.reset()
        if self.verbose and driver.comm.is_global_zero():
            print(format_results(results))
        return results

    def predict(self, dataloader: Any = None, output_dir: Union[str, Path, None] = None,
                predict_fn: Optional[str] = None) -> Any:
        """The model's per-sample outputs in dataset order; see :meth:`Trainer.predict`.
        ``dataloader`` defaults to the Evaluator's one dataloader."""
        if dataloader is None:
            if len(self._given_dataloaders) != 1:
                raise ValueError(f"This Evaluator has {len(self._given_dataloaders)} dataloaders "
                                 f"({sorted(map(str, self._given_dataloaders))}); pass the one to predict.")
            dataloader = next(iter(self._given_dataloaders.values()))
        predictor = Predictor(self.driver, predict_fn, self.input_mapping, self.output_mapping,
                              self.model_wo_auto_param_call)
        return predictor.run(dataloader, output_dir)

    def get_metric(self, dataloader_name: Optional[str] = None, aggregate: bool = True) -> dict[str, Any]:
        """Every metric's results, combined across ranks when ``aggregate`` (each rank saw a share),
        as a flat dict."""
        results: dict[str, Any] = {}
        for metric_name, entry in self._metrics.items():
            values = entry.get_metric(gather=aggregate and self.driver.comm.is_distributed())
            if not isinstance(values, Mapping):
                results[result_key("", metric_name, dataloader_name)] = values
                continue
            for indicator, value in values.items():
                results[result_key(str(indicator), metric_name, dataloader_name)] = value
        return results

    def _add_loss(self, results: dict[str, Any], dataloader_name: Optional[str], loss: Optional[float]) -> None:
        """The evaluation loss as its own result, unless no output held one (or a metric's result
        already has that name: the metric's value is kept)."""
        if loss is None:
            return
        key = result_key(LOSS_KEY, "", dataloader_name)
        if key in results:
            logger.warning("The evaluation loss is not reported as %r: a metric's result already has that name.", key)
            return
        results[key] = loss

    def reset(self) -> None:
        """Reset every metric and the evaluation loss (before each dataloader)."""
        self._loss.reset()
        gathering = self._split.get(self.current_dataloader_name, False)
        for entry in self._metrics.values():
            entry.reset(gathering)


def format_results(results: Mapping[str, Any]) -> str:
    """One readable line per result, for logs."""
    if not results:
        return "Evaluation: no results"
    width = max(len(key) for key in results)
    lines = [f"  {key:<{width}}  {value:.6g}" if isinstance(value, float) else f"  {key:<{width}}  {value}"
             for key, value in results.items()]
    return "Evaluation results:\n" + "\n".join(lines)
