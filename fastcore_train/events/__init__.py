"""The event system: which moments of training can be listened to, and how listeners are called."""
from fastcore_train.events.event import EVENT_SIGNATURES, Event, EventFilter, Filter
from fastcore_train.events.callback import Callback
from fastcore_train.events.manager import CallbackManager

__all__ = ["Event", "EventFilter", "Filter", "EVENT_SIGNATURES", "Callback", "CallbackManager"]
