"""``TorchSingleDriver``: one process, one device (CPU or one CUDA GPU)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

import torch

from fastcore_train.backends.torch import dataloader as torch_dataloader
from fastcore_train.backends.torch.precision import CUDA_GRAD_SCALER, TorchPrecision
from fastcore_train.backends.torch import rng
from fastcore_train.backends.torch.tensors import move_to_device, to_numeric
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.model_calls import single_process_call

_TORCH_KWARGS = {"set_grad_to_none", "non_blocking", "gradscaler_kwargs"}


def parse_device(device: Any, model: torch.nn.Module) -> torch.device:
    """A ``torch.device`` from "cpu", "cuda", "cuda:1", 1, a torch.device, or None (model's device)."""
    if device is None:
        first = next(model.parameters(), None)
        return first.device if first is not None else torch.device("cpu")
    if isinstance(device, torch.device):
        parsed = device
    elif isinstance(device, int) and not isinstance(device, bool):
        parsed = torch.device("cuda", device)
    elif isinstance(device, str):
        try:
            parsed = torch.device(device)
        except RuntimeError as error:
            raise ValueError(f"device={device!r} is not a torch device; use 'cpu', 'cuda' or 'cuda:N'.") from error
    else:
        raise ValueError(f"device must be a str, int, torch.device or None, got {type(device).__name__}.")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} needs CUDA, which this torch cannot use; pass device='cpu'.")
        if parsed.index is None:
            parsed = torch.device("cuda", torch.cuda.current_device())
        if parsed.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) are visible.")
    return parsed


class TorchSingleDriver(Driver):
    """Trains a ``torch.nn.Module`` in this process on one device.

    ``fp16=True`` uses ``torch.autocast`` with float16 and a ``GradScaler`` on CUDA, and bfloat16
    autocast (no scaler needed) on CPU; see
    :class:`~fastcore_train.backends.torch.precision.TorchPrecision`. ``torch_kwargs``:
    ``set_grad_to_none`` (default True), ``non_blocking`` (default True), ``gradscaler_kwargs``
    (passed to ``torch.amp.GradScaler``).
    """

    backend = "torch"
    model_file_suffix = ".pt"
    #: Builds the fp16 grad scaler on CUDA; drivers whose gradients are sharded name another.
    grad_scaler_type: Optional[Callable[..., Any]] = CUDA_GRAD_SCALER

    def __init__(self, model: torch.nn.Module, device: Any = "cpu", fp16: bool = False,
                 torch_kwargs: Optional[dict[str, Any]] = None, data_device: Any = None, **kwargs: Any) -> None:
        super().__init__(model, fp16=fp16)
        torch_kwargs = dict(torch_kwargs or {})
        unknown = set(torch_kwargs) - _TORCH_KWARGS
        if unknown:
            raise TypeError(f"Unknown torch_kwargs {sorted(unknown)}; accepted: {sorted(_TORCH_KWARGS)}.")
        self._device = parse_device(device, model)
        self._data_device = parse_device(data_device, model) if data_device is not None else self._device
        self._set_grad_to_none = torch_kwargs.get("set_grad_to_none", True)
        self._non_blocking = torch_kwargs.get("non_blocking", True)
        self.precision: TorchPrecision = TorchPrecision(self._device, fp16, torch_kwargs.get("gradscaler_kwargs"),
                                                        self.grad_scaler_type)

    # ------------------------------------------------------------------ set-up and facts
    def setup(self) -> None:
        self.model.to(self._device)
        self.precision.setup()

    def check_optimizer(self, optimizer: Any) -> None:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"The torch driver needs torch.optim.Optimizer instances, got {type(optimizer).__name__}.")

    def check_dataloader(self, dataloader: Any, name: str) -> None:
        if not hasattr(dataloader, "__iter__"):
            raise TypeError(f"{name} must be iterable (e.g. a torch.utils.data.DataLoader), got {type(dataloader).__name__}.")

    @property
    def model_device(self) -> torch.device:
        return self._device

    @property
    def data_device(self) -> torch.device:
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
        return torch.no_grad()

    def zero_grad(self) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=self._set_grad_to_none)

    def move_data_to_device(self, batch: Any) -> Any:
        return move_to_device(batch, self._data_device, self._non_blocking)

    def tensor_to_numeric(self, value: Any) -> Any:
        return to_numeric(value)

    # ------------------------------------------------------------------ data
    def get_dataloader_args(self, dataloader: Any) -> Any:
        return torch_dataloader.get_dataloader_args(dataloader)

    def replace_batch_sampler(self, dataloader: Any, batch_sampler: Any) -> Any:
        return torch_dataloader.replace_batch_sampler(dataloader, batch_sampler)

    # ------------------------------------------------------------------ persistence
    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        model = self.unwrap_model()
        torch.save(model.state_dict() if only_state_dict else model, path, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        loaded = torch.load(path, map_location=self._device, weights_only=only_state_dict, **kwargs)
        if isinstance(loaded, torch.nn.Module):
            loaded = loaded.state_dict()
        elif not only_state_dict and not isinstance(loaded, dict):
            raise TypeError(f"{str(path)!r} holds a {type(loaded).__name__}, not a model or state dict.")
        self.unwrap_model().load_state_dict(loaded)

    def save_training_state(self, path: Path) -> None:
        torch.save(self.training_state([optimizer.state_dict() for optimizer in self.optimizers]), path)

    def load_training_state(self, path: Path) -> None:
        self.restore_training_state(torch.load(path, map_location=self._device, weights_only=True))

    def get_rng_state(self) -> dict[str, Any]:
        return rng.get_rng_state()

    def set_rng_state(self, state: dict[str, Any]) -> None:
        rng.set_rng_state(state)
