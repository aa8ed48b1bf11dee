"""Finding the monitored value in flat evaluation results."""
from __future__ import annotations

from fastcore_train.controllers.monitor import get_monitor_value, is_better, resolve_monitor_key

RESULTS = {"acc#acc#dev": 0.5, "f#f1#dev": 0.25, "acc#acc#test": 0.75}


def test_exact_key_and_prefix_match():
    assert resolve_monitor_key(RESULTS, "acc#acc#test") == "acc#acc#test"
    assert resolve_monitor_key(RESULTS, "acc") == "acc#acc#dev"
    assert resolve_monitor_key(RESULTS, "f#f1") == "f#f1#dev"
    assert resolve_monitor_key(RESULTS, "loss") is None


def test_monitor_value_and_comparison():
    assert get_monitor_value(RESULTS, "f") == 0.25
    assert get_monitor_value(RESULTS, lambda r: r["acc#acc#dev"] + r["acc#acc#test"]) == 1.25
    assert get_monitor_value({}, "acc") is None
    assert is_better(0.6, None, True) and is_better(0.6, 0.5, True) and not is_better(0.6, 0.5, False)
