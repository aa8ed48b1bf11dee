"""fastNLP 1.0's metric API, framework-free: elements, get_metric reducing over ranks and putting
local values back, all_gather_object, and library metrics recognised without importing them."""
import copy
import sys

import numpy as np
import pytest

from fastcore_train.drivers.registry import backend_for_metric
from fastcore_train.metrics import Metric
from fastcore_train.metrics.element import Element


class Counter(Metric):
    def __init__(self, method="sum", **kwargs):
        super().__init__(**kwargs)
        self.register_element("n", 0, aggregate_method=method)

    def update(self, values):
        self.n += len(values)

    def get_metric(self):
        return {"n": self.n.get_scalar()}


def two_rank_gather(other_rank_values):
    """The ``all_gather_object`` contract for rank 0 of 2: its own dict, then rank 1's."""
    return lambda local: [local, copy.deepcopy(other_rank_values)]


def test_get_metric_reduces_over_ranks_then_puts_local_values_back():
    metric = Counter()
    metric.update([1, 2, 3])
    with metric.gather_with(two_rank_gather({"n": np.array(4)})):
        assert metric.get_metric() == {"n": 7}
        assert metric.get_metric() == {"n": 7}, "a second call does not count rank 1 twice"
    assert metric.n == 3
    assert metric.get_metric() == {"n": 3}, "alone, nothing is gathered"


@pytest.mark.parametrize("method, expected", [("sum", 7), ("mean", 3.5), ("max", 4), ("min", 3)])
def test_each_aggregate_method(method, expected):
    metric = Counter(method)
    metric.update([1, 2, 3])
    with metric.gather_with(two_rank_gather({"n": np.array(4)})):
        assert metric.get_metric() == {"n": expected}


def test_no_aggregate_method_is_an_error_only_across_ranks():
    metric = Counter(None)
    metric.update([1])
    assert metric.get_metric() == {"n": 1}
    with metric.gather_with(two_rank_gather({"n": np.array(4)})):
        with pytest.raises(RuntimeError, match="no aggregate_method"):
            metric.get_metric()


def test_aggregate_when_get_metric_false_never_gathers():
    metric = Counter(aggregate_when_get_metric=False)
    metric.update([1])
    with metric.gather_with(lambda local: pytest.fail("gathered")):
        assert metric.get_metric() == {"n": 1}
        assert metric.all_gather_object("x") == ["x"]


def test_a_subclass_calling_super_get_metric_reduces_once():
    class Twice(Counter):
        def get_metric(self):
            return {"double": 2 * super().get_metric()["n"]}

    metric = Twice()
    metric.update([1])
    with metric.gather_with(two_rank_gather({"n": np.array(2)})):
        assert metric.get_metric() == {"double": 6}


def test_all_gather_object_in_get_metric():
    class Gathering(Metric):
        def update(self, x):
            self.x = x

        def get_metric(self):
            return {"all": self.all_gather_object(self.x)}

    metric = Gathering()
    metric.update(5)
    assert metric.get_metric() == {"all": [5]}
    with metric.gather_with(lambda obj: [obj, 6]):
        assert metric.get_metric() == {"all": [5, 6]}


def test_reset_override_without_super_still_resets_elements():
    class OwnReset(Counter):
        def reset(self):
            self.extra = []

    metric = OwnReset()
    metric.update([1, 2])
    metric.reset()
    assert metric.n == 0 and metric.extra == []


def test_fastnlp_errors_for_element_names():
    class Clash(Metric):
        def __init__(self):
            super().__init__(backend="numpy")
            self.count = 0
            self.register_element("count", 0)

    with pytest.raises(RuntimeError, match="clashes"):  # fastNLP's error type (and ours: ValueError)
        Clash()
    metric = Counter()
    with pytest.raises(RuntimeError, match="register_element"):
        metric.other = Element("other", 0, "sum")


def test_element_arithmetic_and_assignment_on_numpy():
    metric = Counter(backend="numpy")
    metric.n = 3
    assert isinstance(metric.n, Element) and metric.n.backend == "numpy"
    assert metric.n + 1 == 4 and 10 - metric.n == 7 and metric.n / 2 == 1.5 and -metric.n == -3
    assert f"{metric.n:.1f}" == "3.0" and metric.n.item() == 3 and metric.n.shape == ()
    metric.n = 2.5
    assert metric.n.get_scalar() == 2.5, "an int element takes a fraction without truncation"
    metric.n = np.array([1, 2])
    with pytest.raises(ValueError, match="holds 2 values"):
        metric.n.get_scalar()
    assert list(metric.n + np.array([1, 1])) == [2, 3] and len(metric.n) == 2
    with pytest.raises(TypeError, match="cannot hold"):
        metric.n = object()
    metric.reset()
    assert metric.n == 0


def test_unknown_backend_is_explained():
    with pytest.raises(ValueError, match="not a metric backend"):
        Counter(backend="tensorflow")
    with pytest.raises(TypeError, match="first argument is backend"):
        Metric(True)


@pytest.mark.also_per_backend  # proves something only where the framework is installed
def test_library_metrics_are_recognised_by_class_module_without_import():
    before = set(sys.modules)
    torchmetrics_like = type("Accuracy", (), {"__module__": "torchmetrics.classification.accuracy"})()
    paddle_like = type("Accuracy", (), {"__module__": "paddle.metric.metrics"})()
    paddle_other = type("Linear", (), {"__module__": "paddle.nn.layer"})()
    assert backend_for_metric(torchmetrics_like).name == "torch"
    assert backend_for_metric(paddle_like).name == "paddle"
    assert backend_for_metric(paddle_other) is None and backend_for_metric(Counter()) is None
    imported = {name.split(".")[0] for name in set(sys.modules) - before}
    assert not imported & {"torch", "paddle", "torchmetrics"}, "recognising a metric imports no framework"
