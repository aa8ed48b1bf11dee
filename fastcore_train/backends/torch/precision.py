"""torch's calls for the precision layer (:mod:`fastcore_train.drivers.precision`).

``fp16=True`` means ``torch.autocast`` with float16 and a ``torch.amp.GradScaler`` on CUDA, and
bfloat16 autocast (which needs no scaler) on CPU; ``torch_kwargs={"autocast_dtype": "bfloat16"}``
asks for bfloat16 on CUDA too (no scaler). Drivers whose gradients are sharded build
another scaler type; DeepSpeed's engine scales losses itself (:class:`DeepSpeedPrecision`).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, ContextManager, Optional

import torch

from fastcore_train.drivers.precision import Precision

#: Builds the scaler of fp16 on CUDA from ``gradscaler_kwargs``.
CUDA_GRAD_SCALER: Callable[..., Any] = functools.partial(torch.amp.GradScaler, "cuda")


class TorchPrecision(Precision):
    """Full precision unless ``fp16``; then autocast on ``device`` (float16 on CUDA, bfloat16 on
    CPU) and, on CUDA, a grad scaler ``scaler_type(**gradscaler_kwargs)`` (None: no scaler)."""

    def __init__(self, device: torch.device, fp16: bool = False, gradscaler_kwargs: Optional[dict[str, Any]] = None,
                 scaler_type: Optional[Callable[..., Any]] = CUDA_GRAD_SCALER,
                 autocast_dtype: Optional[str] = None) -> None:
        super().__init__(fp16, gradscaler_kwargs)
        self.device = device
        if autocast_dtype not in (None, "float16", "bfloat16"):
            raise ValueError(f"torch_kwargs['autocast_dtype'] must be 'float16' or 'bfloat16', got {autocast_dtype!r}.")
        default = torch.float16 if device.type == "cuda" else torch.bfloat16
        self.autocast_dtype = default if autocast_dtype is None else getattr(torch, autocast_dtype)
        self._scaler_type = scaler_type

    def new_scaler(self) -> Optional[Any]:
        # bfloat16 has float32's range: its gradients need no scaling
        if self.device.type != "cuda" or self._scaler_type is None or self.autocast_dtype == torch.bfloat16:
            return None
        return self._scaler_type(**self.gradscaler_kwargs)

    def autocast(self) -> ContextManager[Any]:
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def clip_utilities(self) -> Any:
        return torch.nn.utils


class DeepSpeedPrecision(TorchPrecision):
    """DeepSpeed's: the engine (``engine``, set when the driver builds it) keeps fp32 master weights
    and scales fp16 losses itself, so there is no grad scaler here. When the engine trains in half
    precision the forward autocasts to its dtype (evaluation on the bare module needs it too);
    otherwise as :class:`TorchPrecision`."""

    def __init__(self, device: torch.device, fp16: bool = False) -> None:
        super().__init__(device, fp16, scaler_type=None)
        self.engine: Optional[Any] = None

    def engine_dtype(self) -> Optional[torch.dtype]:
        """The engine's half dtype, or None (no engine yet, or full precision)."""
        if self.engine is None:
            return None
        if self.engine.fp16_enabled():
            return torch.float16
        if self.engine.bfloat16_enabled():
            return torch.bfloat16
        return None

    def forward_context(self) -> ContextManager[Any]:
        dtype = self.engine_dtype()
        if dtype is not None:
            return torch.autocast(device_type=self.device.type, dtype=dtype)
        return super().forward_context()
