"""Metrics of the frameworks' own libraries (torchmetrics, ``paddle.metric``) in the Evaluator.

A library metric is recognised from its class's module, through the registry's
``metric_modules`` (no import of the library here); the backend that declares the library supplies
an adapter in its ``metrics`` module (``backends/<name>/metrics.py``: ``adapt(metric)``). The
adapter gives the Evaluator one shape for every library: the function whose parameters are
matched to the outputs and the batch, ``reset``, ``to(device)``, and ``get_metric(gather)`` whose
result covers every rank's share of the data when ``gather`` (the driver's ``all_gather_object``)
is given.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Optional

from fastcore_train.drivers.registry import backend_for_metric, load_backend_part
from fastcore_train.metrics.element_ops import METRICS_PART, Gather

__all__ = ["MetricAdapter", "adapt_metric"]


class MetricAdapter(ABC):
    """One library metric as the Evaluator uses it.

    ``update_fn`` is called with the outputs' and the batch's entries that ``signature_fn`` (or
    ``update_fn`` itself when None) names.
    """

    def __init__(self, metric: Any, update_fn: Callable[..., Any],
                 signature_fn: Optional[Callable[..., Any]] = None) -> None:
        self.metric = metric
        self.update_fn = update_fn
        self.signature_fn = signature_fn

    def to(self, device: Any) -> None:
        """Put the metric's state on the driver's data device (a no-op where the library keeps numpy)."""

    @abstractmethod
    def reset(self, gathering: bool) -> None:
        """Start a new evaluation; ``gathering``: its ``get_metric`` will be given a gather."""

    @abstractmethod
    def get_metric(self, all_gather_object: Optional[Gather]) -> Any:
        """The result as python numbers (a number or a dict of them); over every rank's share when
        ``all_gather_object`` is given, of this rank's data alone when None."""


def adapt_metric(metric: Any) -> Optional[MetricAdapter]:
    """The adapter of ``metric`` when it belongs to a metric library a backend declares, else None."""
    entry = backend_for_metric(metric)
    if entry is None:
        return None
    module = load_backend_part(entry, METRICS_PART)
    adapt = getattr(module, "adapt", None)
    if adapt is None:
        raise TypeError(f"Backend {entry.name!r} declares metric libraries {entry.metric_modules} but "
                        f"{module.__name__} has no adapt(metric).")
    return adapt(metric)
