"""Host snapshots of jittor state for asynchronous checkpoints (see ``drivers/persistence.py``).

``jt.save`` pickles a ``Var`` as ``(Var, (var.data,))``, its values as a numpy array. The snapshot
holds a :class:`HostVar` per ``Var``: a numpy copy of its values (taken once pending operations
are done) that pickles exactly as the ``Var`` does, so writing it in the background runs no
jittor operation and gives the same file, byte for byte.

The numpy buffers of one snapshot are kept (:class:`~fastcore_train.drivers.host_buffers.HostBuffers`,
by position, shape and dtype) and the next snapshot copies into them: copying into memory
already mapped is several times faster than allocating the whole state afresh each time.
"""
from __future__ import annotations

from typing import Any, Optional

import jittor as jt
import numpy as np

from fastcore_train.drivers.host_buffers import HostBuffers
from fastcore_train.utils.nested import copy_tensors


class HostVar:
    """A ``Var``'s values in host memory, pickled as the ``Var`` itself (read back as a ``Var``)."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __reduce__(self) -> tuple[Any, tuple[np.ndarray]]:
        return jt.Var, (self.data,)


def host_copy(data: Any, buffers: Optional[HostBuffers] = None) -> Any:
    """``data`` (nested state dicts) with every ``jt.Var`` as a :class:`HostVar` copy of its values,
    copied into ``buffers`` (the previous snapshot's, by position, shape and dtype) where they fit."""
    jt.sync_all()
    with (buffers or HostBuffers()).reuse() as round_:
        def copy(var: jt.Var) -> HostVar:
            values = var.data
            key = (len(round_.taken), values.shape, values.dtype.str)
            buffer, new = round_.take(key, lambda: np.array(values, copy=True, order="K"))
            if not new:
                np.copyto(buffer, values)
            return HostVar(buffer)

        return copy_tensors(data, jt.Var, copy)
