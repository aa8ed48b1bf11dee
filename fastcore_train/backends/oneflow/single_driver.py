"""``OneflowSingleDriver``: one process, one device (CPU or one CUDA GPU)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

import oneflow as flow

from fastcore_train.backends.oneflow import dataloader as oneflow_dataloader
from fastcore_train.backends.oneflow.precision import OneflowPrecision
from fastcore_train.backends.oneflow.rng import Reseeder, module_generators
from fastcore_train.backends.oneflow.tensors import move_to_device, to_numeric
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.model_calls import single_process_call

_ONEFLOW_KWARGS = {"set_grad_to_none", "gradscaler_kwargs", "autocast_dtype"}


def check_oneflow_kwargs(oneflow_kwargs: Optional[dict[str, Any]], accepted: set[str]) -> dict[str, Any]:
    """A copy of ``oneflow_kwargs``; unknown keys are a TypeError listing the accepted ones."""
    oneflow_kwargs = dict(oneflow_kwargs or {})
    unknown = set(oneflow_kwargs) - accepted
    if unknown:
        raise TypeError(f"Unknown oneflow_kwargs {sorted(unknown)}; accepted: {sorted(accepted)}.")
    return oneflow_kwargs


def parse_device(device: Any, model: Optional[flow.nn.Module] = None) -> flow.device:
    """A ``flow.device`` from "cpu", "cuda", "cuda:1", 1, a flow.device, or None (the model's device)."""
    if device is None:
        first = next(model.parameters(), None) if model is not None else None
        return first.device if first is not None else flow.device("cpu")
    if isinstance(device, flow.device):
        parsed = device
    elif isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise ValueError(f"device={device} is not a GPU index; pass 'cpu', 'cuda:N' or a device list.")
        parsed = flow.device("cuda", device)
    elif isinstance(device, str):
        try:
            parsed = flow.device(device)
        except Exception as error:  # oneflow raises RuntimeError or its own error types
            raise ValueError(f"device={device!r} is not a oneflow device; use 'cpu', 'cuda' or 'cuda:N'.") from error
    else:
        raise ValueError(f"device must be a str, int, oneflow.device or None, got {type(device).__name__}.")
    if parsed.type == "cuda":
        if not flow.cuda.is_available():
            raise ValueError(f"device={device!r} needs CUDA, which this oneflow cannot use; pass device='cpu'.")
        if parsed.index >= flow.cuda.device_count():
            raise ValueError(f"device={device!r}: only {flow.cuda.device_count()} CUDA device(s) are visible.")
    elif parsed.type != "cpu":
        raise ValueError(f"device={device!r}: the oneflow driver trains on 'cpu' or 'cuda:N'.")
    return parsed


class OneflowSingleDriver(Driver):
    """Trains a ``oneflow.nn.Module`` in this process on one device.

    ``fp16=True`` uses ``oneflow.autocast`` (float16) with a ``GradScaler`` on CUDA; oneflow's
    autocast is disabled on CPU, so there the run trains in float32 (with a warning); see
    :class:`~fastcore_train.backends.oneflow.precision.OneflowPrecision`.
    ``oneflow_kwargs``: ``set_grad_to_none`` (default False, oneflow's default),
    ``gradscaler_kwargs`` (passed to ``oneflow.amp.GradScaler``), ``autocast_dtype``.
    Random state: see :mod:`fastcore_train.backends.oneflow.rng` (generators are reseeded after
    every training backward, so that a resumed run is exact).
    """

    backend = "oneflow"
    model_file_suffix = ".oneflow"  # flow.save writes a folder: checkpoint/model.oneflow/

    def __init__(self, model: flow.nn.Module, device: Any = "cpu", fp16: bool = False,
                 oneflow_kwargs: Optional[dict[str, Any]] = None, data_device: Any = None, **kwargs: Any) -> None:
        super().__init__(model, fp16=fp16)
        oneflow_kwargs = check_oneflow_kwargs(oneflow_kwargs, _ONEFLOW_KWARGS)
        self._device = parse_device(device, model)
        self._data_device = parse_device(data_device, model) if data_device is not None else self._device
        self._set_grad_to_none = bool(oneflow_kwargs.get("set_grad_to_none", False))
        self.precision: OneflowPrecision = OneflowPrecision(self._device, fp16, oneflow_kwargs.get("gradscaler_kwargs"),
                                                            oneflow_kwargs.get("autocast_dtype", flow.float16))
        self.rng: Optional[Reseeder] = None

    # ------------------------------------------------------------------ set-up and facts
    def setup(self) -> None:
        self.unwrap_model().to(self._device)
        self.precision.setup()
        self._setup_rng()

    def _setup_rng(self) -> None:
        self.rng = Reseeder(flow.default_generator.initial_seed())
        self.rng.generators = module_generators(self.unwrap_model())

    def check_optimizer(self, optimizer: Any) -> None:
        if not isinstance(optimizer, flow.optim.Optimizer):
            raise TypeError(f"The oneflow driver needs oneflow.optim.Optimizer instances, got "
                            f"{type(optimizer).__name__}.")

    def check_dataloader(self, dataloader: Any, name: str) -> None:
        if not hasattr(dataloader, "__iter__"):
            raise TypeError(f"{name} must be iterable (e.g. a oneflow.utils.data.DataLoader), got "
                            f"{type(dataloader).__name__}.")

    @property
    def model_device(self) -> flow.device:
        return self._device

    @property
    def data_device(self) -> flow.device:
        return self._data_device

    @property
    def needs_data_move(self) -> bool:
        return self._data_device.type != "cpu"

    # ------------------------------------------------------------------ forward / backward
    def get_model_call_fn(self, fn_name: str, for_training: bool = True
                          ) -> tuple[Callable[..., Any], Optional[Callable[..., Any]]]:
        return single_process_call(self.model, fn_name)

    def set_model_mode(self, mode: str) -> None:
        if mode not in ("train", "eval"):
            raise ValueError(f"mode must be 'train' or 'eval', got {mode!r}.")
        self.model.train(mode == "train")

    def evaluate_context(self) -> ContextManager[Any]:
        return flow.no_grad()

    def backward(self, loss: flow.Tensor) -> None:
        super().backward(loss)
        if self.rng is not None:
            self.rng.advance()

    def zero_grad(self) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=self._set_grad_to_none)

    def move_data_to_device(self, batch: Any) -> Any:
        return move_to_device(batch, self._data_device)

    def tensor_to_numeric(self, value: Any) -> Any:
        return to_numeric(value)

    # ------------------------------------------------------------------ data
    def get_dataloader_args(self, dataloader: Any) -> Any:
        return oneflow_dataloader.get_dataloader_args(dataloader)

    def replace_batch_sampler(self, dataloader: Any, batch_sampler: Any) -> Any:
        return oneflow_dataloader.replace_batch_sampler(dataloader, batch_sampler)

    # ------------------------------------------------------------------ persistence
    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """``flow.save`` of the state dict (or of the whole model): ``path`` becomes a folder."""
        model = self.unwrap_model()
        flow.save(model.state_dict() if only_state_dict else model, str(path), **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        if not Path(path).is_dir():
            raise FileNotFoundError(f"{str(path)!r} is not a folder written by oneflow.save; pass the path "
                                    "given to save_model.")
        loaded = flow.load(str(path), map_location=self._device, **kwargs)
        if isinstance(loaded, flow.nn.Module):
            loaded = loaded.state_dict()
        elif not isinstance(loaded, dict):
            raise TypeError(f"{str(path)!r} holds a {type(loaded).__name__}, not a model or state dict.")
        self.unwrap_model().load_state_dict(loaded)

    def save_training_state(self, path: Path) -> None:
        flow.save(self.training_state([optimizer.state_dict() for optimizer in self.optimizers]), str(path))

    def load_training_state(self, path: Path) -> None:
        self.restore_training_state(flow.load(str(path), map_location=self._device))

    def get_rng_state(self) -> dict[str, Any]:
        if self.rng is None:
            self._setup_rng()
        return self.rng.state()

    def set_rng_state(self, state: dict[str, Any]) -> None:
        if self.rng is None:
            self._setup_rng()
        self.rng.load(state)
