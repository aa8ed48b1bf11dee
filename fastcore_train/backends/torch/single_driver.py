"""``TorchSingleDriver``: one process, one device (CPU or one CUDA GPU)."""
from __future__ import annotations

from typing import Any, Callable, ContextManager, Optional

import torch

from fastcore_train.backends.torch.dataloader import TorchData
from fastcore_train.backends.torch.persistence import TorchPersistence
from fastcore_train.backends.torch.precision import CUDA_GRAD_SCALER, TorchPrecision
from fastcore_train.drivers.backend_options import check_backend_options
from fastcore_train.drivers.cuda_device import parse_cuda_device
from fastcore_train.drivers.driver import Driver

_TORCH_KWARGS = {"set_grad_to_none", "non_blocking", "gradscaler_kwargs", "autocast_dtype"}


def parse_device(device: Any, model: torch.nn.Module) -> torch.device:
    """A ``torch.device`` from "cpu", "cuda", "cuda:1", 1, a torch.device, or None (model's device)."""
    return parse_cuda_device(device, model, framework="torch", device_class=torch.device, cuda=torch.cuda,
                             name_errors=(RuntimeError,))


class TorchSingleDriver(Driver):
    """Trains a ``torch.nn.Module`` in this process on one device.

    ``fp16=True`` uses ``torch.autocast`` with float16 and a ``GradScaler`` on CUDA, and bfloat16
    autocast (no scaler needed) on CPU; see
    :class:`~fastcore_train.backends.torch.precision.TorchPrecision`. ``torch_kwargs``:
    ``set_grad_to_none`` (default True), ``non_blocking`` (default True), ``gradscaler_kwargs``
    (passed to ``torch.amp.GradScaler``), ``autocast_dtype`` (``"float16"``, the default on CUDA,
    or ``"bfloat16"``, the default on CPU, which needs no grad scaler).
    """

    backend = "torch"
    _optimizer_type = torch.optim.Optimizer
    _optimizer_name = "torch.optim.Optimizer"
    #: Builds the fp16 grad scaler on CUDA; drivers whose gradients are sharded name another.
    grad_scaler_type: Optional[Callable[..., Any]] = CUDA_GRAD_SCALER

    def __init__(self, model: torch.nn.Module, device: Any = "cpu", fp16: bool = False,
                 torch_kwargs: Optional[dict[str, Any]] = None, data_device: Any = None, **kwargs: Any) -> None:
        super().__init__(model, fp16=fp16)
        torch_kwargs = check_backend_options("torch_kwargs", torch_kwargs, _TORCH_KWARGS)
        self._device = parse_device(device, model)
        self._set_grad_to_none = torch_kwargs.get("set_grad_to_none", True)
        self.data = TorchData(parse_device(data_device, model) if data_device is not None else self._device,
                              torch_kwargs.get("non_blocking", True))
        self.io = TorchPersistence(self)
        self.precision: TorchPrecision = TorchPrecision(self._device, fp16, torch_kwargs.get("gradscaler_kwargs"),
                                                        self.grad_scaler_type, torch_kwargs.get("autocast_dtype"))

    def setup(self) -> None:
        self.model.to(self._device)
        self.precision.setup()

    def evaluate_context(self) -> ContextManager[Any]:
        return torch.no_grad()

    def zero_grad(self) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=self._set_grad_to_none)
