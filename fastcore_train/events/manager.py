"""Wires callbacks and listener functions to events and calls them cheaply.

For every event the manager keeps an attribute that is ``None`` when nobody listens, or a single
callable taking ``(trainer, *args)``. The training loop tests that attribute and skips the call,
which is what makes an event with no listener free.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, Optional

from fastcore_train.events.callback import Callback
from fastcore_train.events.event import EVENT_SIGNATURES, Event, EventFilter

Listener = Callable[..., Any]


def _check_listener_arity(event: Event, fn: Listener) -> None:
    """Fail early, at registration, when ``fn`` cannot take the event's arguments."""
    expected = 1 + len(EVENT_SIGNATURES[event.name])
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())
    keyword_only = [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if keyword_only:
        raise TypeError(
            f"Listener {getattr(fn, '__qualname__', fn)!r} for {event!r} has keyword-only parameter(s) "
            f"{', '.join(keyword_only)} without a default; listeners are called positionally, so give them "
            "defaults or remove them.")
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) > expected or len(positional) < expected:
        names = ", ".join(("trainer",) + EVENT_SIGNATURES[event.name])
        raise TypeError(
            f"Listener {getattr(fn, '__qualname__', fn)!r} for {event!r} must accept ({names}); "
            f"its signature is {sig}."
        )


def _gated(fn: Listener, gate: EventFilter) -> Listener:
    def call(trainer: Any, *args: Any) -> None:
        if gate.should_run(trainer):
            fn(trainer, *args)
    return call


def _listener_name(fn: Listener) -> str:
    """A listener as a person would name it: ``Class.on_exception`` of a callback, else the function."""
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        return f"{type(owner).__name__}.{getattr(fn, '__name__', 'on_exception')}"
    return getattr(fn, "__qualname__", repr(fn))


def _chain(fns: list[Listener]) -> Listener:
    def call(trainer: Any, *args: Any) -> None:
        for fn in fns:
            fn(trainer, *args)
    return call


class CallbackManager:
    """Holds a trainer's callbacks and listener functions and dispatches events to them."""

    def __init__(self, callbacks: Optional[Iterable[Callback]] = None) -> None:
        self.callbacks: list[Callback] = []
        # (event, fn, filter-or-None) in registration order; filters are per listener.
        self._listeners: list[tuple[Event, Listener, Optional[EventFilter]]] = []
        for name in EVENT_SIGNATURES:
            setattr(self, name, None)
        for cb in callbacks or ():
            self.add_callback(cb, rebuild=False)
        self._rebuild()

    # ------------------------------------------------------------------ registration
    def add_callback(self, callback: Callback, rebuild: bool = True) -> None:
        if not isinstance(callback, Callback):
            raise TypeError(
                f"callbacks must be instances of fastcore_train.Callback, got {type(callback).__name__}; "
                "for a plain function use trainer.add_callback_fn(Event.on_xxx(), fn) or @Trainer.on(...)."
            )
        if any(cb.callback_name == callback.callback_name for cb in self.callbacks):
            raise ValueError(
                f"Two callbacks share the callback_name {callback.callback_name!r}; their checkpoint "
                "states would collide. Override `callback_name` to make each unique."
            )
        self.callbacks.append(callback)
        if rebuild:
            self._rebuild()

    def add_fn(self, event: Event, fn: Listener) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"Expected an Event such as Event.on_train_begin(), got {event!r}.")
        if not callable(fn):
            raise TypeError(f"The listener for {event!r} must be callable, got {fn!r}.")
        _check_listener_arity(event, fn)
        gate = event.make_filter() if event.is_gated else None
        self._listeners.append((event, fn, gate))
        self._rebuild()

    def _rebuild(self) -> None:
        """Recompute the per-event dispatch attributes after any registration."""
        per_event: dict[str, list[Listener]] = {name: [] for name in EVENT_SIGNATURES}
        for cb in self.callbacks:
            cls = type(cb)
            for name in EVENT_SIGNATURES:
                if getattr(cls, name) is not getattr(Callback, name):
                    per_event[name].append(getattr(cb, name))
        for event, fn, gate in self._listeners:
            per_event[event.name].append(fn if gate is None else _gated(fn, gate))
        for name, fns in per_event.items():
            setattr(self, name, None if not fns else fns[0] if len(fns) == 1 else _chain(fns))
        self._exception_listeners = [(_listener_name(fn), fn) for fn in per_event["on_exception"]]

    def fire_exception(self, trainer: Any, exception: BaseException) -> list[tuple[str, Exception]]:
        """Call every ``on_exception`` listener, each even when one before it fails.

        Returns ``(listener name, error)`` for each listener that raised, so the caller can report
        them while the run's own ``exception`` stays the one raised (and a progress bar after a
        failing listener is still closed).
        """
        failures = []
        for name, fn in self._exception_listeners:
            try:
                fn(trainer, exception)
            except Exception as error:  # noqa: BLE001 - reported by the caller, the run's error goes on
                failures.append((name, error))
        return failures

    # ------------------------------------------------------------------ checkpoint state
    def callback_states(self, trainer: Any) -> dict[str, Any]:
        """Fire ``on_save_checkpoint``: each Callback's returned state, keyed by its name."""
        states = {}
        for cb in self.callbacks:
            state = cb.on_save_checkpoint(trainer)
            if state is not None:
                states[cb.callback_name] = state
        for event, fn, gate in self._listeners:
            if event.name == "on_save_checkpoint" and (gate is None or gate.should_run(trainer)):
                fn(trainer)
        return states

    def load_callback_states(self, trainer: Any, states: dict[str, Any]) -> None:
        """Fire ``on_load_checkpoint``, handing each Callback the state it saved."""
        for cb in self.callbacks:
            # "Name#detail" also reads a state saved as plain "Name" (a converted checkpoint's LR
            # schedule position: the scheduler's class differs between frameworks).
            cb.on_load_checkpoint(trainer, states.get(cb.callback_name, states.get(cb.callback_name.split("#")[0])))
        for event, fn, gate in self._listeners:
            if event.name == "on_load_checkpoint" and (gate is None or gate.should_run(trainer)):
                fn(trainer, states)

    def filter_states(self) -> list[Optional[dict[str, int]]]:
        """Every listener's every/once/filter_fn counters, in registration order."""
        return [gate.state_dict() if gate is not None else None for _, _, gate in self._listeners]

    def load_filter_states(self, saved: list[Optional[dict[str, int]]]) -> None:
        if len(saved) != len(self._listeners):
            raise ValueError(
                f"The checkpoint holds counters for {len(saved)} listener functions but this trainer "
                f"has {len(self._listeners)}: register the same Trainer.on/add_callback_fn listeners, "
                "in the same order, before loading it."
            )
        for (_, _, gate), counters in zip(self._listeners, saved):
            if gate is not None and counters is not None:
                gate.load_state_dict(counters)
