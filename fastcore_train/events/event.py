"""Event names, their listener signatures, and the every/once/filter_fn gate.

An :class:`Event` names a moment of training (``Event.on_train_batch_end()``) and optionally
gates how often a listener runs: ``every=n`` (each n-th time), ``once=n`` (only the n-th time;
``once=True``, as fastNLP writes it, is the first) or
``filter_fn(filter, trainer) -> bool``. The gate's counters are plain ints so that checkpoints
can carry them and a resumed run fires listeners exactly as an uninterrupted one would.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Union

# Every event, in the order a training run meets them, with the arguments a listener receives
# after ``trainer``. This table is the single source of truth for names and signatures.
EVENT_SIGNATURES: dict[str, tuple[str, ...]] = {
    "on_after_trainer_initialized": ("driver",),
    "on_sanity_check_begin": (),
    "on_sanity_check_end": ("sanity_check_res",),
    "on_train_begin": (),
    "on_train_epoch_begin": (),
    "on_fetch_data_begin": (),
    "on_fetch_data_end": (),
    "on_train_batch_begin": ("batch", "indices"),
    "on_before_backward": ("outputs",),
    "on_after_backward": (),
    "on_before_optimizers_step": ("optimizers",),
    "on_after_optimizers_step": ("optimizers",),
    "on_before_zero_grad": ("optimizers",),
    "on_after_zero_grad": ("optimizers",),
    "on_train_batch_end": (),
    "on_evaluate_begin": (),
    "on_evaluate_end": ("results",),
    "on_train_epoch_end": (),
    "on_train_end": (),
    "on_save_model": (),
    "on_load_model": (),
    "on_save_checkpoint": (),
    "on_load_checkpoint": ("states",),
    "on_exception": ("exception",),
}


def gate_once(owner: str, once: Any) -> Any:
    """``once`` as the call number it names: fastNLP's ``once=True`` is the first call (``True == 1``
    in its gate), so it is read as ``1``; ``once=False`` would never run and is refused."""
    if once is True:
        return 1
    if once is False:
        raise ValueError(f"{owner}: once=False never runs the listener; leave once out to run it on every call, "
                         "or give once=True (the first call) or once=n (the n-th call).")
    return once


def check_gate(owner: str, every: Any, once: Any, filter_fn: Any) -> None:
    """Raise ValueError unless at most one of every/once/filter_fn is given, and validly
    (``once`` already read by :func:`gate_once`)."""
    given = [k for k, v in (("every", every), ("once", once), ("filter_fn", filter_fn)) if v is not None]
    if len(given) > 1:
        raise ValueError(
            f"{owner} got {' and '.join(given)}: give at most one of every, once and "
            "filter_fn (none means every call)."
        )
    for key, value in (("every", every), ("once", once)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise ValueError(f"{owner}: {key} must be a positive int, got {value!r}.")
    if filter_fn is not None and not callable(filter_fn):
        raise ValueError(f"{owner}: filter_fn must be callable(filter, trainer) -> bool.")


class EventFilter:
    """Decides whether a listener runs on a given call; counts calls and executions.

    ``filter_fn`` receives this object (so it can read ``num_called``/``num_executed``) and the
    trainer, and returns whether to run.
    """

    __slots__ = ("every", "once", "filter_fn", "num_called", "num_executed")

    def __init__(self, every: Optional[int] = None, once: Optional[int] = None,
                 filter_fn: Optional[Callable[["EventFilter", Any], bool]] = None) -> None:
        self.every = every
        self.once = once
        self.filter_fn = filter_fn
        self.num_called = 0
        self.num_executed = 0

    def should_run(self, trainer: Any) -> bool:
        """Count this call and say whether the listener runs on it."""
        self.num_called += 1
        if self.filter_fn is not None:
            run = bool(self.filter_fn(self, trainer))
        elif self.once is not None:
            run = self.num_called == self.once
        else:
            run = self.num_called % self.every == 0
        if run:
            self.num_executed += 1
        return run

    def state_dict(self) -> dict[str, int]:
        return {"num_called": self.num_called, "num_executed": self.num_executed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.num_called = int(state["num_called"])
        self.num_executed = int(state["num_executed"])


class Event:
    """A moment of training plus an optional gate; build one with ``Event.on_xxx(...)``."""

    __slots__ = ("name", "every", "once", "filter_fn")

    def __init__(self, name: str, every: Optional[int] = None, once: Optional[int] = None,
                 filter_fn: Optional[Callable[[EventFilter, Any], bool]] = None) -> None:
        if name not in EVENT_SIGNATURES:
            raise ValueError(f"Unknown event {name!r}; known events: {', '.join(EVENT_SIGNATURES)}.")
        once = gate_once(f"Event {name!r}", once)
        check_gate(f"Event {name!r}", every, once, filter_fn)
        self.name = name
        self.every = every
        self.once = once
        self.filter_fn = filter_fn

    @property
    def is_gated(self) -> bool:
        """True when the listener does not simply run on every call."""
        return self.once is not None or self.filter_fn is not None or (self.every or 1) > 1

    def make_filter(self) -> EventFilter:
        return EventFilter(self.every if self.every is not None else 1, self.once, self.filter_fn)

    def __repr__(self) -> str:
        gate = ""
        if self.every is not None:
            gate = f"every={self.every}"
        elif self.once is not None:
            gate = f"once={self.once}"
        elif self.filter_fn is not None:
            gate = f"filter_fn={getattr(self.filter_fn, '__name__', self.filter_fn)}"
        return f"Event.{self.name}({gate})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and (self.name, self.every, self.once, self.filter_fn) == (
            other.name, other.every, other.once, other.filter_fn)

    def __hash__(self) -> int:
        return hash((self.name, self.every, self.once, id(self.filter_fn)))


def _make_constructor(event_name: str) -> staticmethod:
    def constructor(every: Optional[int] = None, once: Union[int, bool, None] = None,
                    filter_fn: Optional[Callable[[EventFilter, Any], bool]] = None) -> Event:
        return Event(event_name, every=every, once=once, filter_fn=filter_fn)

    args = ", ".join(("trainer",) + EVENT_SIGNATURES[event_name])
    constructor.__name__ = event_name
    constructor.__qualname__ = f"Event.{event_name}"
    constructor.__doc__ = (f"The ``{event_name}`` event; listeners are called as fn({args}). "
                           "Give at most one of every, once, filter_fn.")
    return staticmethod(constructor)


for _name in EVENT_SIGNATURES:
    setattr(Event, _name, _make_constructor(_name))
del _name


class Filter:
    """Decorator that runs a function only on some of its calls, like an event's gate.

    ``@Filter(every=n)`` runs it on every n-th call, ``@Filter(once=n)`` on the n-th call only,
    ``@Filter(filter_fn=fn)`` when ``fn(filter, first_argument)`` is true (none given: every call).
    Skipped calls return None. The gate is the wrapper's ``event_filter`` attribute (also
    ``__fastNLP_filter__``, fastNLP 1.0's name), whose ``state_dict()`` / ``load_state_dict()``
    save and restore its counters ``num_called`` and ``num_executed``.
    """

    def __init__(self, every: Optional[int] = None, once: Optional[int] = None,
                 filter_fn: Optional[Callable[[EventFilter, Any], bool]] = None) -> None:
        once = gate_once("Filter", once)
        check_gate("Filter", every, once, filter_fn)
        self.gate = EventFilter(every if every is not None or once is not None or filter_fn is not None else 1,
                                once, filter_fn)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        gate = self.gate

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if gate.should_run(args[0] if args else None):
                return fn(*args, **kwargs)
            return None

        wrapper.event_filter = gate  # type: ignore[attr-defined]
        wrapper.__fastNLP_filter__ = gate  # type: ignore[attr-defined]
        return wrapper
