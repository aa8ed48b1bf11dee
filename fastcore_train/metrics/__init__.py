"""Framework-neutral evaluation metrics (numpy only); see :class:`Metric` for the contract."""
from fastcore_train.metrics.accuracy import Accuracy
from fastcore_train.metrics.classify_f1_pre_rec import ClassifyFPreRecMetric
from fastcore_train.metrics.metric import Metric
from fastcore_train.metrics.span_f1_pre_rec import SpanFPreRecMetric

__all__ = ["Metric", "Accuracy", "ClassifyFPreRecMetric", "SpanFPreRecMetric"]
