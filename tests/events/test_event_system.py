"""The event system without any framework: gates, dispatch, registration errors, state."""
from __future__ import annotations

import pytest

from fastcore_train.events import Callback, CallbackManager, Event, EventFilter
from fastcore_train.events.event import EVENT_SIGNATURES


def test_every_event_has_a_constructor_and_a_callback_method():
    for name in EVENT_SIGNATURES:
        event = getattr(Event, name)()
        assert event.name == name and not event.is_gated
        assert callable(getattr(Callback, name))


@pytest.mark.parametrize("kwargs, message", [
    ({"every": 0}, "every must be a positive int"),
    ({"once": -1}, "once must be a positive int"),
    ({"every": True}, "every must be a positive int"),
    ({"filter_fn": 3}, "filter_fn must be callable"),
    ({"every": 2, "filter_fn": lambda f, t: True}, "at most one of every, once and filter_fn"),
])
def test_bad_gates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Event.on_train_batch_end(**kwargs)


def test_unknown_event_name():
    with pytest.raises(ValueError, match="Unknown event 'on_train_batch_ends'"):
        Event("on_train_batch_ends")


def test_filters_count_calls_and_executions():
    every = EventFilter(every=3)
    assert [every.should_run(None) for _ in range(7)] == [False, False, True, False, False, True, False]
    assert (every.num_called, every.num_executed) == (7, 2)
    once = EventFilter(once=2)
    assert [once.should_run(None) for _ in range(4)] == [False, True, False, False]
    custom = EventFilter(filter_fn=lambda f, trainer: trainer == "go")
    assert [custom.should_run(t) for t in ("no", "go", "go")] == [False, True, True]
    restored = EventFilter(every=3)
    restored.load_state_dict(every.state_dict())
    assert restored.should_run(None) is False and restored.should_run(None) is True


def test_an_event_without_listeners_is_none():
    manager = CallbackManager()
    assert all(getattr(manager, name) is None for name in EVENT_SIGNATURES)


def test_only_overridden_callback_methods_are_wired():
    class OnlyBatchEnd(Callback):
        def on_train_batch_end(self, trainer):
            trainer.append("batch_end")

    manager = CallbackManager([OnlyBatchEnd()])
    wired = [name for name in EVENT_SIGNATURES if getattr(manager, name) is not None]
    assert wired == ["on_train_batch_end"]
    log: list[str] = []
    manager.on_train_batch_end(log)
    assert log == ["batch_end"]


def test_listeners_run_in_registration_order_with_their_gates():
    class First(Callback):
        def on_train_begin(self, trainer):
            trainer.append("callback")

    manager = CallbackManager([First()])
    manager.add_fn(Event.on_train_begin(), lambda t: t.append("fn"))
    manager.add_fn(Event.on_train_begin(every=2), lambda t: t.append("every2"))
    log: list[str] = []
    manager.on_train_begin(log)
    manager.on_train_begin(log)
    assert log == ["callback", "fn", "callback", "fn", "every2"]


def test_registration_errors():
    manager = CallbackManager()
    with pytest.raises(TypeError, match="instances of fastcore_train.Callback"):
        manager.add_callback(lambda trainer: None)
    with pytest.raises(TypeError, match=r"must accept \(trainer, outputs\)"):
        manager.add_fn(Event.on_before_backward(), lambda trainer: None)
    with pytest.raises(TypeError, match="Expected an Event"):
        manager.add_fn("on_train_begin", lambda trainer: None)
    manager.add_callback(Callback())
    with pytest.raises(ValueError, match="share the callback_name 'Callback'"):
        manager.add_callback(Callback())


def test_state_round_trip_of_callbacks_and_filters():
    class Stateful(Callback):
        def __init__(self):
            self.value = 0

        def on_save_checkpoint(self, trainer):
            return {"value": self.value}

        def on_load_checkpoint(self, trainer, states):
            self.value = states["value"]

    source = Stateful()
    source.value = 42
    manager = CallbackManager([source])
    manager.add_fn(Event.on_train_batch_end(every=5), lambda t: None)
    manager.on_train_batch_end(None)
    assert manager.callback_states(trainer=None) == {"Stateful": {"value": 42}}
    assert manager.filter_states() == [{"num_called": 1, "num_executed": 0}]

    target = Stateful()
    restored = CallbackManager([target])
    restored.add_fn(Event.on_train_batch_end(every=5), lambda t: None)
    restored.load_callback_states(None, manager.callback_states(None))
    restored.load_filter_states(manager.filter_states())
    assert target.value == 42
    assert restored.filter_states() == manager.filter_states()

    mismatched = CallbackManager([Stateful()])
    with pytest.raises(ValueError, match="counters for 1 listener functions but this trainer has 0"):
        mismatched.load_filter_states(manager.filter_states())
