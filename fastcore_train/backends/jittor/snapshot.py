"""Host snapshots of jittor state for asynchronous checkpoints (see ``drivers/persistence.py``).

``jt.save`` writes a ``Var`` as its numpy array; the snapshot holds those arrays (copies, once
pending operations are done), so writing it in the background runs no jittor operation and
gives the same file, byte for byte.
"""
from __future__ import annotations

from typing import Any

import jittor as jt
import numpy as np

from fastcore_train.utils.nested import copy_tensors


def host_copy(data: Any) -> Any:
    """``data`` (nested state dicts) with every ``jt.Var`` as a numpy copy of its values."""
    jt.sync_all()
    return copy_tensors(data, jt.Var, lambda var: np.array(var.numpy(), copy=True, order="K"))
