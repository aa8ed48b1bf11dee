"""paddle's calls for the precision layer (:mod:`fastcore_train.drivers.precision`).

``fp16=True`` on a GPU means ``paddle.amp.auto_cast`` around the forward and a
``paddle.amp.GradScaler``. On CPU paddle's amp casts nothing, so the run trains in float32 and
says so with a warning.
"""
from __future__ import annotations

from typing import Any, Callable, ContextManager, Optional

import paddle

from fastcore_train.backends.paddle.devices import is_gpu
from fastcore_train.drivers.precision import Precision


class PaddlePrecision(Precision):
    """Full precision unless ``fp16`` on a GPU ``device``; then ``paddle.amp.auto_cast(level,
    dtype)`` and a grad scaler ``scaler_type(**gradscaler_kwargs)``."""

    unavailable_warning = ("fp16=True does nothing on CPU with paddle: paddle.amp.auto_cast only casts on GPU, "
                           "so this run trains in float32. Pass a GPU device to train in mixed precision, "
                           "or fp16=False to silence this warning.")

    def __init__(self, device: str, fp16: bool = False, gradscaler_kwargs: Optional[dict[str, Any]] = None,
                 level: str = "O1", dtype: str = "float16",
                 scaler_type: Callable[..., Any] = paddle.amp.GradScaler) -> None:
        super().__init__(fp16, gradscaler_kwargs)
        self.device = device
        self.level = level
        self.dtype = dtype
        self._scaler_type = scaler_type

    def available(self) -> bool:
        return is_gpu(self.device)

    def new_scaler(self) -> Any:
        return self._scaler_type(**self.gradscaler_kwargs)

    def autocast(self) -> ContextManager[Any]:
        return paddle.amp.auto_cast(enable=True, level=self.level, dtype=self.dtype)

    def clip_utilities(self) -> Any:
        return paddle.nn.utils
