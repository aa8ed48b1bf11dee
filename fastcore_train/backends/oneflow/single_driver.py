"""``OneflowSingleDriver``: one process, one device (CPU or one CUDA GPU)."""
from __future__ import annotations

from typing import Any, ContextManager, Optional

import oneflow as flow

from fastcore_train.backends.oneflow.dataloader import OneflowData
from fastcore_train.backends.oneflow.persistence import OneflowPersistence
from fastcore_train.backends.oneflow.precision import OneflowPrecision
from fastcore_train.backends.oneflow.rng import Reseeder, check_reseed_mode, drawing_modules, module_generators
from fastcore_train.drivers.backend_options import check_backend_options
from fastcore_train.drivers.cuda_device import parse_cuda_device
from fastcore_train.drivers.driver import Driver
from fastcore_train.log import logger

_ONEFLOW_KWARGS = {"set_grad_to_none", "gradscaler_kwargs", "autocast_dtype", "reseed"}


def parse_device(device: Any, model: Optional[flow.nn.Module] = None) -> flow.device:
    """A ``flow.device`` from "cpu", "cuda", "cuda:1", 1, a flow.device, or None (the model's device)."""
    # oneflow raises RuntimeError or its own error types for a bad device name.
    return parse_cuda_device(device, model, framework="oneflow", device_class=flow.device, cuda=flow.cuda,
                             name_errors=(Exception,), cpu_or_cuda_only=True)


class OneflowSingleDriver(Driver):
    """Trains a ``oneflow.nn.Module`` in this process on one device.

    ``fp16=True`` uses ``oneflow.autocast`` (float16) with a ``GradScaler`` on CUDA; oneflow's
    autocast is disabled on CPU, so there the run trains in float32 (with a warning); see
    :class:`~fastcore_train.backends.oneflow.precision.OneflowPrecision`.
    ``oneflow_kwargs``: ``set_grad_to_none`` (default False, oneflow's default),
    ``gradscaler_kwargs`` (passed to ``oneflow.amp.GradScaler``), ``autocast_dtype``, ``reseed``.
    Random state: see :mod:`fastcore_train.backends.oneflow.rng` (generators are reseeded after
    every training backward for a model that draws random numbers, so that a resumed run is exact:
    ``reseed="auto"``, the default; ``"every_backward"`` always, ``"on_load"`` never).
    """

    backend = "oneflow"
    _optimizer_type = flow.optim.Optimizer
    _optimizer_name = "oneflow.optim.Optimizer"

    def __init__(self, model: flow.nn.Module, device: Any = "cpu", fp16: bool = False,
                 oneflow_kwargs: Optional[dict[str, Any]] = None, data_device: Any = None, **kwargs: Any) -> None:
        super().__init__(model, fp16=fp16)
        oneflow_kwargs = check_backend_options("oneflow_kwargs", oneflow_kwargs, _ONEFLOW_KWARGS)
        self._device = parse_device(device, model)
        data_place = parse_device(data_device, model) if data_device is not None else self._device
        self.data = OneflowData(data_place, needs_move=data_place.type != "cpu")
        self.io = OneflowPersistence(self)
        self._set_grad_to_none = bool(oneflow_kwargs.get("set_grad_to_none", False))
        self.precision: OneflowPrecision = OneflowPrecision(self._device, fp16, oneflow_kwargs.get("gradscaler_kwargs"),
                                                            oneflow_kwargs.get("autocast_dtype", flow.float16))
        self._reseed_mode = check_reseed_mode(oneflow_kwargs.get("reseed", "auto"))
        self._reseeder: Optional[Reseeder] = None

    def setup(self) -> None:
        self.unwrap_model().to(self._device)
        self.precision.setup()
        self._reseeder = None
        self.reseeder()  # from the seed and the generators the model has now

    def reseeder(self) -> Reseeder:
        """The per-backward reseeder of oneflow's generators (see ``rng.py``), built on first use."""
        if self._reseeder is None:
            drawing = drawing_modules(self.unwrap_model())
            every_backward = self._reseed_mode == "every_backward" or (self._reseed_mode == "auto" and bool(drawing))
            self._reseeder = Reseeder(flow.default_generator.initial_seed(), every_backward)
            self._reseeder.generators = module_generators(self.unwrap_model())
            if drawing and self._reseed_mode == "on_load":
                logger.warning("oneflow_kwargs={'reseed': 'on_load'} but modules of the model draw random numbers "
                               "(%s): a resumed run will not repeat their draws; leave 'reseed' at its default "
                               "for an exact resume.", ", ".join(drawing))
        return self._reseeder

    def evaluate_context(self) -> ContextManager[Any]:
        return flow.no_grad()

    def backward(self, loss: flow.Tensor) -> None:
        super().backward(loss)
        self.reseeder().advance()

    def zero_grad(self) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=self._set_grad_to_none)
