"""``GradClipCallback``: clip gradients by norm or by value before every optimizer step.

Framework-neutral: the clipping itself is the driver's (``clip_grad_norm``/``clip_grad_value``),
which uses its framework's own facility, unscales mixed-precision gradients first and, in a
distributed job, acts on the gradients already synchronised across ranks.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Optional

from fastcore_train.events.callback import Callback

CLIP_TYPES = ("norm", "value")


class GradClipCallback(Callback):
    """Clips the model's gradients right before the optimizers step.

    ``clip_type="norm"`` scales all gradients together so that their global ``norm_type``-norm
    is at most ``clip_value``; ``clip_type="value"`` clamps each gradient element to
    ``[-clip_value, clip_value]``. It acts in ``on_before_optimizers_step``, which fires only on
    the micro-batch that steps, so with gradient accumulation the accumulated gradients are
    clipped once. ``last_total_norm`` is the norm before clipping of the latest step (norm
    clipping only, as a float), for logging; it is read from the device only when asked for.
    """

    def __init__(self, clip_value: float = 1.0, clip_type: str = "norm", norm_type: float = 2.0) -> None:
        if clip_type not in CLIP_TYPES:
            raise ValueError(f"clip_type must be one of {CLIP_TYPES}, got {clip_type!r}.")
        self.clip_value = _positive("clip_value", clip_value)
        self.clip_type = clip_type
        self.norm_type = _positive("norm_type", norm_type)
        self._last_norm: Any = None
        self._driver: Any = None

    @property
    def callback_name(self) -> str:
        """Unique per clip type, so a norm clip and a value clip can be used together."""
        return f"GradClipCallback#{self.clip_type}"

    @property
    def last_total_norm(self) -> Optional[float]:
        if self._last_norm is None:
            return None
        return float(self._driver.data.to_numeric(self._last_norm))

    def on_before_optimizers_step(self, trainer: Any, optimizers: list) -> None:
        if self.clip_type == "norm":
            self._driver = trainer.driver
            self._last_norm = trainer.driver.clip_grad_norm(self.clip_value, self.norm_type)
        else:
            trainer.driver.clip_grad_value(self.clip_value)


def _positive(name: str, value: Any) -> float:
    """``value`` as a float, or a ValueError saying it must be a positive number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}.")
    return float(value)


class TorchGradClipCallback(GradClipCallback):
    """fastNLP 1.0's name and arguments for :class:`GradClipCallback` (it works on every backend).

    ``parameters`` is accepted for fastNLP code: fastNLP 1.0 replaced it by every parameter the
    optimizers hold when training started, and so does this callback (the driver clips the
    model's gradients); passing it logs that it is not used.
    """

    def __init__(self, clip_value: float = 1, clip_type: str = "norm", parameters: Any = None) -> None:
        super().__init__(clip_value=clip_value, clip_type=clip_type)
        if parameters is not None:
            from fastcore_train.log import logger
            logger.warning("TorchGradClipCallback(parameters=...) is not used: every parameter of the model is "
                           "clipped, as fastNLP 1.0 did in practice.")
