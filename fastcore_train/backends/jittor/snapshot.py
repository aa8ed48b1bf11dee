"""Host snapshots of jittor state for asynchronous checkpoints (see ``drivers/persistence.py``).

``jt.save`` pickles a ``Var`` as ``(Var, (var.data,))``, its values as a numpy array. The snapshot
holds a :class:`HostVar` per ``Var``: a numpy copy of its values (taken once pending operations
are done) that pickles exactly as the ``Var`` does, so writing it in the background runs no
jittor operation and gives the same file, byte for byte.
"""
from __future__ import annotations

from typing import Any

import jittor as jt
import numpy as np

from fastcore_train.utils.nested import copy_tensors


class HostVar:
    """A ``Var``'s values in host memory, pickled as the ``Var`` itself (read back as a ``Var``)."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __reduce__(self) -> tuple[Any, tuple[np.ndarray]]:
        return jt.Var, (self.data,)


def host_copy(data: Any) -> Any:
    """``data`` (nested state dicts) with every ``jt.Var`` as a :class:`HostVar` copy of its values."""
    jt.sync_all()
    return copy_tensors(data, jt.Var, lambda var: HostVar(np.array(var.data, copy=True, order="K")))
