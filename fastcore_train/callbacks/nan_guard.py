"""``NanGuardCallback``, at home in :mod:`fastcore_train.controllers.nan_guard` (the Trainer adds
one by default); re-exported here with the other callbacks."""
from fastcore_train.controllers.nan_guard import NanGuardCallback, NonFiniteLossError

__all__ = ["NanGuardCallback", "NonFiniteLossError"]
