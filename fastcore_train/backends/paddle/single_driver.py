"""``PaddleSingleDriver``: one process, one device (CPU or one GPU)."""
from __future__ import annotations

from typing import Any, Callable, ContextManager, Optional

import paddle

from fastcore_train.backends.paddle.dataloader import PaddleData
from fastcore_train.backends.paddle.devices import parse_device
from fastcore_train.backends.paddle.persistence import PaddlePersistence
from fastcore_train.backends.paddle.precision import PaddlePrecision
from fastcore_train.drivers.backend_options import check_backend_options
from fastcore_train.drivers.driver import Driver

_PADDLE_KWARGS = {"set_grad_to_zero", "input_spec", "gradscaler_kwargs", "amp_level", "amp_dtype"}



class PaddleSingleDriver(Driver):
    """Trains a ``paddle.nn.Layer`` in this process on one device.

    The device is made paddle's current one (``paddle.set_device``), so dataloaders produce
    tensors there. ``fp16=True`` uses ``paddle.amp.auto_cast`` with a ``GradScaler`` on GPU; on
    CPU paddle's amp does nothing, so training runs in float32 (with a warning); see
    :class:`~fastcore_train.backends.paddle.precision.PaddlePrecision`.
    ``paddle_kwargs``: ``set_grad_to_zero`` (``clear_grad`` keeps zeroed gradients; default
    True, paddle's default), ``input_spec`` (a list of ``paddle.static.InputSpec``: whole-model
    saves also export the model with ``paddle.jit.save``), ``gradscaler_kwargs``, ``amp_level``
    (default ``"O1"``) and ``amp_dtype`` (default ``"float16"``).
    """

    backend = "paddle"
    _optimizer_type = paddle.optimizer.Optimizer
    _optimizer_name = "paddle.optimizer.Optimizer"
    #: Builds the fp16 grad scaler on GPU; Fleet's driver wraps it for data parallel.
    grad_scaler_type: Callable[..., Any] = paddle.amp.GradScaler

    def __init__(self, model: paddle.nn.Layer, device: Any = "cpu", fp16: bool = False,
                 paddle_kwargs: Optional[dict[str, Any]] = None, data_device: Any = None, **kwargs: Any) -> None:
        super().__init__(model, fp16=fp16)
        paddle_kwargs = check_backend_options("paddle_kwargs", paddle_kwargs, _PADDLE_KWARGS)
        self._device = parse_device(device)
        data_place = parse_device(data_device) if data_device is not None else self._device
        # Paddle's DataLoader puts batches on the current device, which setup() makes ours.
        self.data = PaddleData(data_place, needs_move=data_place != self._device)
        self._set_grad_to_zero = bool(paddle_kwargs.get("set_grad_to_zero", True))
        self.io = PaddlePersistence(self, paddle_kwargs.get("input_spec"))
        self.precision: PaddlePrecision = PaddlePrecision(
            self._device, fp16, paddle_kwargs.get("gradscaler_kwargs"), level=paddle_kwargs.get("amp_level", "O1"),
            dtype=paddle_kwargs.get("amp_dtype", "float16"), scaler_type=self.grad_scaler_type)

    def setup(self) -> None:
        paddle.set_device(self._device)
        self.unwrap_model().to(device=self._device)
        self.precision.setup()

    def evaluate_context(self) -> ContextManager[Any]:
        return paddle.no_grad()

    def zero_grad(self) -> None:
        for optimizer in self.optimizers:
            optimizer.clear_grad(set_to_zero=self._set_grad_to_zero)
