"""The Evaluator's metrics: ours (:class:`~fastcore_train.metrics.Metric`), the frameworks' libraries'
(torchmetrics, ``paddle.metric``, through :mod:`fastcore_train.metrics.adapters`) and plain objects
with ``update``/``get_metric``, each updated, reset and read the same way.

Across ranks: when each rank evaluated a share of a dataloader, our metrics and the library
metrics get the driver's ``all_gather_object`` and combine every rank's share; when every rank saw
all of it, nothing is gathered (gathering would count the data once per rank).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.registry import all_backends, backend_for_metric
from fastcore_train.log import logger
from fastcore_train.metrics.adapters import MetricAdapter, adapt_metric
from fastcore_train.metrics.element import Element
from fastcore_train.metrics.function_metric import FunctionMetric, is_metric_function
from fastcore_train.metrics.metric import Metric
from fastcore_train.utils.param_call import ParamBinder

__all__ = ["EvaluatorMetric", "normalize_metrics"]


#: transformers' names for what a metric reads: a ``ModelOutput``'s ``logits`` are the predictions,
#: the batch's ``labels`` (``label`` in a raw datasets row) the targets; used when no key has the
#: metric's own name (``pred``, ``preds``, ``target``), so an HF model needs no mapping.
HF_METRIC_NAMES = {"pred": ("logits",), "preds": ("logits",), "target": ("labels", "label")}
#: What to rename for a metric: the evaluation's mappings only (``input_mapping`` renames the model's
#: inputs too, and a transformers model computes its loss from ``labels``).
METRIC_RENAME_HINT = ("Rename for the metrics with evaluate_output_mapping={'model_output': 'param_name'} or "
                      "evaluate_input_mapping={'batch_key': 'param_name'} (input_mapping would rename the model's "
                      "inputs for training too), or name the metric's update parameters after the keys.")


def _binder(fn: Any, signature_fn: Any = None) -> ParamBinder:
    return ParamBinder(fn, signature_fn, aliases=HF_METRIC_NAMES, hint=METRIC_RENAME_HINT)


class EvaluatorMetric:
    """One metric of the Evaluator, whatever its kind."""

    def __init__(self, name: str, metric: Any, driver: Driver) -> None:
        self.name, self.metric, self.driver = name, metric, driver
        self.adapter: Optional[MetricAdapter] = None
        if is_metric_function(metric):
            self.adapter = FunctionMetric(name, metric, driver.data.to_numpy)
            self.binder = _binder(self.adapter.update)
        elif isinstance(metric, Metric):
            if driver.backend in {entry.name for entry in all_backends()}:
                metric.use_backend(driver.backend)  # backend="auto" follows the driver
            metric.to(driver.data.device)
            self.binder = _binder(metric.update)
        elif (adapter := adapt_metric(metric)) is not None:
            self.adapter = adapter
            adapter.to(driver.data.device)
            self.binder = _binder(adapter.update_fn, adapter.signature_fn)
        else:
            self.binder = _binder(metric.update)

    def check_split(self, split: bool) -> None:
        """Warn once when ranks evaluate shares but this metric will not combine them."""
        if split and isinstance(self.metric, Metric) and self.metric.aggregate_when_get_metric is False:
            logger.warning("metrics[%r] has aggregate_when_get_metric=False while each rank evaluates a share of the "
                           "data: every rank reports its own share.", self.name)

    def reset(self, gathering: bool) -> None:
        if self.adapter is not None:
            self.adapter.reset(gathering)
        else:
            self.metric.reset()

    def get_metric(self, gather: bool) -> Any:
        all_gather_object = self.driver.comm.all_gather_object if gather else None
        if self.adapter is not None:
            return self.adapter.get_metric(all_gather_object)
        if isinstance(self.metric, Metric):
            with self.metric.gather_with(all_gather_object):
                return self._numbers(self.metric.get_metric())
        return self._numbers(self.metric.get_metric())

    def _numbers(self, values: Any) -> Any:
        """Elements and tensors in a result as python numbers."""
        if isinstance(values, Mapping):
            return {key: self._numbers(value) for key, value in values.items()}
        if isinstance(values, Element):
            array = values.numpy()
            return array.reshape(()).item() if array.size == 1 else array.tolist()
        if hasattr(values, "shape") and not isinstance(values, (int, float)):
            try:
                return self.driver.data.to_numeric(values)
            except Exception:  # noqa: BLE001 - not a tensor of the driver's framework: leave it
                return values
        return values


def normalize_metrics(metrics: Any) -> dict[str, Any]:
    """``metrics`` as ``{name: metric}``, each checked to be a metric the Evaluator can run."""
    if metrics is None:
        return {}
    if isinstance(metrics, Metric) or (not isinstance(metrics, Mapping) and _is_metric(metrics)):
        named = metrics.__name__ if is_metric_function(metrics) and hasattr(metrics, "__name__") else \
            type(metrics).__name__.lower()
        return {named: metrics}
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"metrics must be a dict {{name: Metric}} (or one Metric), got {type(metrics).__name__}."
        )
    for name, metric in metrics.items():
        if not isinstance(name, str) or "#" in name:
            raise ValueError(f"Metric names must be strings without '#', got {name!r}.")
        if not _is_metric(metric):
            raise TypeError(
                f"metrics[{name!r}] is a {type(metric).__name__}; a metric is a fastcore_train Metric, a torchmetrics or "
                "paddle.metric metric, an object with update() and get_metric(), or a function "
                "(preds, labels) -> dict (or transformers' compute_metrics(eval_pred) -> dict)."
            )
    return dict(metrics)


def _is_metric(metric: Any) -> bool:
    if isinstance(metric, Metric) or is_metric_function(metric) or backend_for_metric(metric) is not None:
        return True
    return hasattr(metric, "update") and hasattr(metric, "get_metric")
