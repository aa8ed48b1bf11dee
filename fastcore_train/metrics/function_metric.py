"""A plain function as a metric: ``metrics={"f1": my_fn}`` with ``my_fn(preds, labels) -> dict``.

As the transformers Trainer's ``compute_metrics``: the function sees every prediction and label of
the evaluation at once (numpy arrays, ``pred`` and ``target`` of the outputs and the batch), so it
can compute what does not decompose into per-batch sums (F1 over rare classes, AUC, BLEU). In data
parallel each rank evaluates a disjoint share; the shares are gathered and put back in dataset
order before the function runs, so 2 ranks give what one process gives.

A function with one required positional parameter is called in transformers' form instead,
``compute_metrics(eval_pred)``, with an :class:`EvalPrediction` (``eval_pred.predictions``,
``eval_pred.label_ids``; ``predictions, labels = eval_pred``), so an existing ``compute_metrics``
runs unchanged.
"""
from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional

import numpy as np

from fastcore_train.metrics.adapters import MetricAdapter
from fastcore_train.metrics.element_ops import Gather

__all__ = ["EvalPrediction", "FunctionMetric", "is_metric_function", "takes_eval_prediction"]


class EvalPrediction:
    """Every prediction and label of one evaluation, as transformers' ``compute_metrics`` receives them.

    ``predictions`` and ``label_ids`` are numpy arrays in dataset order (lists of arrays when
    samples differ in shape); ``inputs`` is None (the batch's inputs are not collected; return what
    the metric needs from ``evaluate_step``). It unpacks like a tuple:
    ``predictions, labels = eval_pred``.
    """

    __slots__ = ("predictions", "label_ids", "inputs")

    def __init__(self, predictions: Any, label_ids: Any, inputs: Any = None) -> None:
        self.predictions, self.label_ids, self.inputs = predictions, label_ids, inputs

    def _items(self) -> tuple[Any, ...]:
        items = (self.predictions, self.label_ids)
        return items if self.inputs is None else items + (self.inputs,)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __getitem__(self, index: int) -> Any:
        return self._items()[index]

    def __repr__(self) -> str:
        return f"EvalPrediction(predictions={_shape_of(self.predictions)}, label_ids={_shape_of(self.label_ids)})"


def _shape_of(value: Any) -> str:
    shape = getattr(value, "shape", None)
    return f"<array {tuple(shape)}>" if shape is not None else f"<{len(value)} arrays>"


def takes_eval_prediction(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is transformers' ``compute_metrics(eval_pred)``: exactly one required positional
    parameter (``fn(preds, labels)`` has two). A signature that cannot be read means the two-argument form."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        return False
    return sum(1 for p in params if p.kind in positional and p.default is p.empty) == 1


def is_metric_function(metric: Any) -> bool:
    """A callable that is not a metric object (no ``update``): a function of (preds, labels)."""
    return callable(metric) and not hasattr(metric, "update") and not isinstance(metric, type)


def interleave(shares: list[list[Any]]) -> list[Any]:
    """Rank shares of an evaluation split as ``dataset[rank::world_size]`` (the unrepeated
    sequential sampler), merged back into dataset order."""
    total = sum(len(share) for share in shares)
    return [shares[i % len(shares)][i // len(shares)] for i in range(total)]


class FunctionMetric(MetricAdapter):
    """Collects ``pred`` and ``target`` per sample as numpy; calls the function at ``get_metric``."""

    def __init__(self, name: str, fn: Callable[[Any, Any], Any], to_numpy: Callable[[Any], Any]) -> None:
        super().__init__(fn, self.update)
        self.name, self.fn, self.to_numpy = name, fn, to_numpy
        self.preds: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.one_argument = takes_eval_prediction(fn)  # compute_metrics(eval_pred), read once

    def update(self, pred: Any, target: Any) -> None:
        self.preds.extend(np.asarray(self.to_numpy(pred)))
        self.labels.extend(np.asarray(self.to_numpy(target)))

    def reset(self, gathering: bool) -> None:
        self.preds, self.labels = [], []

    def get_metric(self, all_gather_object: Optional[Gather]) -> Any:
        preds, labels = self.preds, self.labels
        if all_gather_object is not None:
            shares = all_gather_object((preds, labels))
            preds = interleave([share[0] for share in shares])
            labels = interleave([share[1] for share in shares])
        if self.one_argument:
            values = self.fn(EvalPrediction(_stack(preds), _stack(labels)))
        else:
            values = self.fn(_stack(preds), _stack(labels))
        if not isinstance(values, Mapping):
            raise TypeError(f"metrics[{self.name!r}] is a function that returned a {type(values).__name__}; a metric "
                            "function must return a dict {name: number}, e.g. {'f1': 0.8}.")
        return {str(key): self._number(key, value) for key, value in values.items()}

    def _number(self, key: Any, value: Any) -> Any:
        """``value`` as a python number (or an array of numbers); anything else is an error naming the metric."""
        if not isinstance(value, (str, bytes)):
            try:
                np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                pass
            else:
                return _number(value)
        function = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        raise TypeError(f"metrics[{self.name!r}]: the function {function} returned {{{str(key)!r}: {value!r}}}; the "
                        f"value of {str(key)!r} is a {type(value).__name__}, not a number. A metric function must "
                        "return a dict {name: number} (or arrays of numbers), e.g. {'f1': 0.8}.")


def _stack(rows: list[np.ndarray]) -> Any:
    if not rows:
        return np.empty((0,))
    if len({row.shape for row in rows}) == 1:
        return np.stack(rows)
    return rows  # ragged (e.g. sequences of different lengths): one array per sample


def _number(value: Any) -> Any:
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    return value
