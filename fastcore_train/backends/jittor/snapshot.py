"""Host snapshots of jittor state for asynchronous checkpoints (see ``drivers/persistence.py``).

``jt.save`` pickles a ``Var`` as ``(Var, (var.data,))``, its values as a numpy array. The snapshot
holds a :class:`HostVar` per ``Var``: a numpy copy of its values (taken once pending operations
are done) that pickles exactly as the ``Var`` does, so writing it in the background runs no
jittor operation and gives the same file, byte for byte.

The numpy buffers of one snapshot are kept in ``cache`` (by position, shape and dtype) and the
next snapshot copies into them (its write is over by then: one write is in flight at a time):
copying into memory already mapped is several times faster than allocating the whole state
afresh each time.
"""
from __future__ import annotations

from typing import Any, Optional

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


def host_copy(data: Any, cache: Optional[dict[tuple[int, tuple[int, ...], str], np.ndarray]] = None) -> Any:
    """``data`` (nested state dicts) with every ``jt.Var`` as a :class:`HostVar` copy of its values;
    ``cache`` holds (and on return, replaces) numpy buffers to copy into."""
    jt.sync_all()
    reusable = cache if cache is not None else {}
    used: dict[tuple[int, tuple[int, ...], str], np.ndarray] = {}

    def copy(var: jt.Var) -> HostVar:
        values = var.data
        key = (len(used), values.shape, values.dtype.str)
        buffer = reusable.pop(key, None)
        if buffer is None:
            buffer = np.array(values, copy=True, order="K")
        else:
            np.copyto(buffer, values)
        used[key] = buffer
        return HostVar(buffer)

    result = copy_tensors(data, jt.Var, copy)
    if cache is not None:
        cache.clear()
        cache.update(used)
    return result
