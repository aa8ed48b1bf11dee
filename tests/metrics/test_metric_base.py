"""Tests of the ``Metric`` base class: elements, reset and the cross-rank ``aggregate``."""
import copy

import numpy as np
import pytest

from fastcore_train.metrics import Metric
from fastcore_train.metrics.element import Element
from tests.metrics.ranks import aggregate_ranks


class Stats(Metric):
    """A metric with one element per aggregate method."""

    def __init__(self, aggregate_when_get_metric=True):
        super().__init__(aggregate_when_get_metric=aggregate_when_get_metric)
        self.register_element("count", 0, aggregate_method="sum")
        self.register_element("hist", np.zeros(3, dtype=np.int32), aggregate_method="sum")
        self.register_element("avg", 0.0, aggregate_method="mean")
        self.register_element("peak", np.zeros(2), aggregate_method="max")
        self.register_element("low", np.full(2, 10.0), aggregate_method="min")

    def update(self, values):
        values = self.to_numpy(values)
        self.count += int(values.size)
        self.hist += np.bincount(values, minlength=3).astype(np.int32)
        self.avg = float(values.mean())
        self.peak = np.maximum(self.peak, values[:2])
        self.low = np.minimum(self.low, values[:2])

    def get_metric(self):
        return {"count": self.count}



def test_register_element_sets_attribute_and_elements_view():
    stats = Stats()
    assert stats.count == 0 and isinstance(stats.count, Element) and type(stats.count.get_scalar()) is int
    assert set(stats.elements) == {"count", "hist", "avg", "peak", "low"}
    with pytest.raises(TypeError):
        stats.elements["count"] = 3


def test_reset_restores_copies_of_initial_values():
    initial = np.zeros(2)

    class Holder(Metric):
        def __init__(self):
            super().__init__()
            self.register_element("arr", initial)

    holder = Holder()
    initial[0] = 5  # the caller's array is not the stored initial value
    holder.arr += 1  # in-place update of the element
    holder.reset()
    np.testing.assert_array_equal(holder.arr, [0, 0])
    holder.arr += 1
    holder.reset()
    np.testing.assert_array_equal(holder.arr, [0, 0])


def test_stats_reset_after_update():
    stats = Stats()
    stats.update(np.array([0, 2, 2]))
    stats.reset()
    assert stats.count == 0
    np.testing.assert_array_equal(stats.hist, [0, 0, 0])
    np.testing.assert_array_equal(stats.low, [10.0, 10.0])


@pytest.mark.parametrize("method", ["avg", "median", ""])
def test_bad_aggregate_method_is_rejected(method):
    metric = Metric()
    with pytest.raises(ValueError, match="Unknown aggregate_method"):
        metric.register_element("x", 0, aggregate_method=method)


def test_registering_a_name_twice_is_rejected():
    metric = Metric()
    metric.register_element("x", 0)
    with pytest.raises(ValueError, match="already registered"):
        metric.register_element("x", 1)


def test_names_clashing_with_attributes_or_invalid_are_rejected():
    metric = Metric()
    with pytest.raises(ValueError, match="clashes"):
        metric.register_element("reset", 0)
    with pytest.raises(ValueError, match="identifier"):
        metric.register_element("not a name", 0)


def test_non_numeric_initial_value_is_rejected():
    with pytest.raises(TypeError, match="python number or a numpy array"):
        Metric().register_element("x", "zero")


def test_register_before_super_init_is_explained():
    class Broken(Metric):
        def __init__(self):
            self.register_element("x", 0)

    with pytest.raises(RuntimeError, match="super"):
        Broken()


def test_update_and_get_metric_are_abstract():
    with pytest.raises(NotImplementedError, match="update"):
        Metric().update(1)
    with pytest.raises(NotImplementedError, match="get_metric"):
        Metric().get_metric()


def test_to_numpy_is_available_as_staticmethod():
    np.testing.assert_array_equal(Metric.to_numpy([1, 2]), np.array([1, 2]))


def test_single_process_aggregate_keeps_values_and_dtypes():
    stats = Stats()
    stats.update(np.array([0, 2, 2]))
    before = copy.deepcopy(dict(stats.elements))
    sent = []

    def all_gather_object(obj):
        sent.append(obj)
        return [obj]

    stats.aggregate(all_gather_object)
    assert set(sent[0]) == set(before)
    assert stats.count == 3 and type(stats.count.get_scalar()) is int
    assert stats.hist.dtype == np.int32
    for name, value in before.items():
        np.testing.assert_array_equal(stats.elements[name], value)
        assert stats.elements[name].dtype == np.asarray(value).dtype


def test_two_rank_aggregate_reduces_with_each_method():
    rank0, rank1 = Stats(), Stats()
    rank0.update(np.array([0, 1, 1]))  # peak/low from [0, 1]
    rank1.update(np.array([2, 0, 2, 2]))  # peak/low from [2, 0]
    aggregate_ranks(rank0, rank1)
    for stats in (rank0, rank1):
        assert stats.count == 7 and type(stats.count.get_scalar()) is int
        np.testing.assert_array_equal(stats.hist, [2, 2, 3])
        assert stats.hist.dtype == np.int32
        assert stats.avg == pytest.approx((2 / 3 + 6 / 4) / 2)
        np.testing.assert_array_equal(stats.peak, [2, 1])
        np.testing.assert_array_equal(stats.low, [0, 0])


def test_aggregate_is_skipped_when_disabled():
    stats = Stats(aggregate_when_get_metric=False)
    stats.update(np.array([1]))

    def all_gather_object(obj):
        raise AssertionError("must not be called")

    stats.aggregate(all_gather_object)
    assert stats.count == 1


def test_sum_elements_of_different_lengths_are_zero_padded():
    class Growing(Metric):
        def __init__(self, counts):
            super().__init__()
            self.register_element("counts", np.asarray(counts, dtype=np.int64))

    short, long = Growing([1, 2]), Growing([10, 20, 30, 40])
    aggregate_ranks(short, long)
    np.testing.assert_array_equal(short.counts, [11, 22, 30, 40])
    np.testing.assert_array_equal(long.counts, [11, 22, 30, 40])


def test_other_methods_refuse_shapes_that_differ_between_ranks():
    class Peak(Metric):
        def __init__(self, size):
            super().__init__()
            self.register_element("peak", np.zeros(size), aggregate_method="max")

    with pytest.raises(ValueError, match="different shapes"):
        aggregate_ranks(Peak(2), Peak(3))


def test_malformed_gather_results_are_reported():
    stats = Stats()
    with pytest.raises(TypeError, match="one entry per rank"):
        stats.aggregate(lambda obj: obj)
    with pytest.raises(TypeError, match="one entry per rank"):
        stats.aggregate(lambda obj: [])
    with pytest.raises(ValueError, match="did not send"):
        stats.aggregate(lambda obj: [obj, {"count": 1}])
