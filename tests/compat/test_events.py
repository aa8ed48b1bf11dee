"""fastNLP 1.0's ``Filter`` decorator and listener checks (issue 12, item 5). Framework-free."""
from __future__ import annotations

import pytest

from fastcore_train import Event, Filter, Trainer


def calls(fn, n):
    return [result for result in (fn(i) for i in range(n)) if result is not None]


def test_filter_every_once_and_default():
    assert calls(Filter(every=10)(lambda x: x), 100) == list(range(9, 100, 10))
    assert calls(Filter(once=10)(lambda x: x), 100) == [9]
    assert calls(Filter()(lambda x: x), 5) == [0, 1, 2, 3, 4]


def test_filter_fn_gets_the_filter_and_the_first_argument():
    seen = []

    def when(gate, first):
        seen.append((gate.num_called, first))
        return first == 3

    assert calls(Filter(filter_fn=when)(lambda x: x), 5) == [3]
    assert seen == [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4)]


def test_filter_state_saves_and_restores_its_counters():
    fn = Filter(every=10)(lambda x: x)
    assert calls(fn, 50) == [9, 19, 29, 39, 49]
    gate = fn.__fastNLP_filter__
    assert gate is fn.event_filter and gate.state_dict() == {"num_called": 50, "num_executed": 5}
    restored = Filter(every=10)(lambda x: x)
    restored.event_filter.load_state_dict({"num_called": 50, "num_executed": 5})
    assert [r for r in (restored(i) for i in range(50, 100)) if r is not None] == list(range(59, 100, 10))


def test_filter_takes_its_gate_from_an_event():
    event = Event.on_train_begin(every=3)
    assert calls(Filter(every=event.every, once=event.once, filter_fn=event.filter_fn)(lambda x: x), 9) == [2, 5, 8]


def test_filter_rejects_two_gates():
    with pytest.raises(ValueError, match="at most one"):
        Filter(every=2, once=3)


def test_listener_with_a_required_keyword_only_parameter_is_refused():
    with pytest.raises(TypeError, match="keyword-only"):
        @Trainer.on(Event.on_before_backward())
        def listener(*args, s):
            pass

    @Trainer.on(Event.on_before_backward(), marker="compat-test-keyword")
    def accepted(*args, s=2):
        pass

    Trainer._custom_callbacks.pop("compat-test-keyword", None)
