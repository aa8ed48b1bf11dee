"""Making numpy arrays in batches jittor Vars and turning Vars (nested in batches and outputs) into
python numbers; the walk through the containers around them is
:func:`fastcore_train.utils.nested.map_tensors`."""
from __future__ import annotations

from typing import Any, Optional

import jittor as jt

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.nested import map_tensors


def move_to_device(data: Any, device: Any = None) -> Any:
    """``data`` with every numeric numpy array inside made a Var (``jt.array``); Vars stay where
    they are (jittor places every Var by ``jt.flags.use_cuda``, so ``device`` is not needed)."""
    return map_tensors_and_arrays(data, jt.Var, jt.array, lambda var: var)


def _var_to_numeric(var: jt.Var) -> Any:
    return var.item() if var.numel() == 1 else var.numpy().tolist()


def to_numeric(data: Any) -> Any:
    """Vars (nested) as python numbers: one element via ``item()``, others via ``tolist()``."""
    return map_tensors(data, jt.Var, _var_to_numeric, keep_mapping_type=False)


def to_numpy(data: Any) -> Any:
    """Tensors (nested) as numpy arrays (0-d for scalars), on the host, detached."""
    return map_tensors(data, jt.Var, lambda var: var.numpy(), keep_mapping_type=False)


def requires_grad(value: Any) -> Optional[bool]:
    """Whether ``value`` is a tensor that backward can train from (None: not a jt.Var)."""
    if not isinstance(value, jt.Var):
        return None
    return bool(value.requires_grad)
