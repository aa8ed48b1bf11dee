"""Making numpy arrays in batches jittor Vars and turning Vars (nested in batches and outputs) into
python numbers; the walk through the containers around them is
:func:`fastcore_train.utils.nested.map_tensors`."""
from __future__ import annotations

from typing import Any

import jittor as jt

from fastcore_train.utils.arrays import map_tensors_and_arrays
from fastcore_train.utils.tensor_reader import TensorReader


def move_to_device(data: Any, device: Any = None) -> Any:
    """``data`` with every numeric numpy array inside made a Var (``jt.array``); Vars stay where
    they are (jittor places every Var by ``jt.flags.use_cuda``, so ``device`` is not needed)."""
    return map_tensors_and_arrays(data, jt.Var, jt.array, lambda var: var)


def _var_to_numeric(var: jt.Var) -> Any:
    return var.item() if var.numel() == 1 else var.numpy().tolist()


_READER = TensorReader(jt.Var, to_number=_var_to_numeric, to_array=lambda var: var.numpy())
to_numeric = _READER.to_numeric
to_numpy = _READER.to_numpy
requires_grad = _READER.requires_grad
