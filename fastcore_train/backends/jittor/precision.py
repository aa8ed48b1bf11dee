"""jittor's calls for the precision layer (:mod:`fastcore_train.drivers.precision`).

``fp16=True`` sets ``jt.flags.auto_mixed_precision_level`` around the forward (jittor's own
mixed precision, on CPU and GPU alike). Jittor scales no losses, so there is no grad scaler; its
backward and clipping go through its optimizers (see the jittor driver).
"""
from __future__ import annotations

from typing import Any, ContextManager

import jittor as jt

from fastcore_train.drivers.precision import Precision


class JittorPrecision(Precision):
    """Full precision unless ``fp16``; then the mixed-precision flag at ``amp_level`` (default 5)."""

    def __init__(self, fp16: bool = False, amp_level: int = 5) -> None:
        super().__init__(fp16)
        self.amp_level = amp_level

    def autocast(self) -> ContextManager[Any]:
        return jt.flag_scope(auto_mixed_precision_level=self.amp_level)
