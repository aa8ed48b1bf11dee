"""oneflow's calls for the precision layer (:mod:`fastcore_train.drivers.precision`).

``fp16=True`` on CUDA means ``oneflow.autocast`` (float16 unless told otherwise) around the
forward and a ``oneflow.amp.GradScaler``. oneflow's autocast is disabled on CPU, so there the run
trains in float32 and says so with a warning. OneFlow 0.9's GradScaler only configures
``nn.Graph``: eager training then autocasts without loss scaling (also with a warning).
"""
from __future__ import annotations

from typing import Any, ContextManager, Optional

import oneflow as flow

from fastcore_train.drivers.precision import Precision
from fastcore_train.log import logger


class OneflowPrecision(Precision):
    """Full precision unless ``fp16`` on a CUDA ``device``; then ``oneflow.autocast(dtype)`` and,
    where this oneflow's GradScaler scales eager losses, that scaler (``gradscaler_kwargs``)."""

    unavailable_warning = ("fp16=True does nothing on CPU with oneflow: oneflow.autocast is disabled on CPU, so "
                           "this run trains in float32. Pass a CUDA device to train in mixed precision, or "
                           "fp16=False to silence this warning.")

    def __init__(self, device: flow.device, fp16: bool = False, gradscaler_kwargs: Optional[dict[str, Any]] = None,
                 dtype: Any = flow.float16) -> None:
        super().__init__(fp16, gradscaler_kwargs)
        self.device = device
        self.dtype = dtype

    def available(self) -> bool:
        return self.device.type == "cuda"

    def new_scaler(self) -> Optional[Any]:
        scaler = flow.amp.GradScaler(**self.gradscaler_kwargs)
        if hasattr(scaler, "scale"):
            return scaler
        logger.warning("This oneflow's GradScaler works only in nn.Graph mode, so fp16=True trains with "
                       "autocast but without loss scaling (small float16 gradients may underflow). Pass "
                       "oneflow_kwargs={'autocast_dtype': oneflow.bfloat16} where the GPU supports it.")
        return None

    def autocast(self) -> ContextManager[Any]:
        return flow.autocast(device_type="cuda", dtype=self.dtype)

    def clip_utilities(self) -> Any:
        return flow.nn.utils
