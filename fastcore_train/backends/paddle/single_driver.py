"""``PaddleSingleDriver``: one process, one device (CPU or one GPU)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

import paddle

from fastcore_train.backends.paddle import dataloader as paddle_dataloader
from fastcore_train.backends.paddle.devices import parse_device
from fastcore_train.backends.paddle.optim_state import load_optimizer_state, save_optimizer_state
from fastcore_train.backends.paddle.persistence import load_model_file, save_model_file
from fastcore_train.backends.paddle.precision import PaddlePrecision
from fastcore_train.backends.paddle.rng import get_rng_state, set_rng_state
from fastcore_train.backends.paddle.tensors import move_to_device, to_numeric
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.model_calls import single_process_call

_PADDLE_KWARGS = {"set_grad_to_zero", "input_spec", "gradscaler_kwargs", "amp_level", "amp_dtype"}


def check_paddle_kwargs(paddle_kwargs: Optional[dict[str, Any]], accepted: set[str]) -> dict[str, Any]:
    """A copy of ``paddle_kwargs``; unknown keys are a TypeError listing the accepted ones."""
    paddle_kwargs = dict(paddle_kwargs or {})
    unknown = set(paddle_kwargs) - accepted
    if unknown:
        raise TypeError(f"Unknown paddle_kwargs {sorted(unknown)}; accepted: {sorted(accepted)}.")
    return paddle_kwargs


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
    model_file_suffix = ".pdparams"
    #: Builds the fp16 grad scaler on GPU; Fleet's driver wraps it for data parallel.
    grad_scaler_type: Callable[..., Any] = paddle.amp.GradScaler

    def __init__(self, model: paddle.nn.Layer, device: Any = "cpu", fp16: bool = False,
                 paddle_kwargs: Optional[dict[str, Any]] = None, data_device: Any = None, **kwargs: Any) -> None:
        super().__init__(model, fp16=fp16)
        paddle_kwargs = check_paddle_kwargs(paddle_kwargs, _PADDLE_KWARGS)
        self._device = parse_device(device)
        self._data_device = parse_device(data_device) if data_device is not None else self._device
        self._set_grad_to_zero = bool(paddle_kwargs.get("set_grad_to_zero", True))
        self._input_spec = paddle_kwargs.get("input_spec")
        self.precision: PaddlePrecision = PaddlePrecision(
            self._device, fp16, paddle_kwargs.get("gradscaler_kwargs"), level=paddle_kwargs.get("amp_level", "O1"),
            dtype=paddle_kwargs.get("amp_dtype", "float16"), scaler_type=self.grad_scaler_type)

    # ------------------------------------------------------------------ set-up and facts
    def setup(self) -> None:
        paddle.set_device(self._device)
        self.unwrap_model().to(device=self._device)
        self.precision.setup()

    def check_optimizer(self, optimizer: Any) -> None:
        if not isinstance(optimizer, paddle.optimizer.Optimizer):
            raise TypeError(f"The paddle driver needs paddle.optimizer.Optimizer instances, got "
                            f"{type(optimizer).__name__}.")

    def check_dataloader(self, dataloader: Any, name: str) -> None:
        if not hasattr(dataloader, "__iter__"):
            raise TypeError(f"{name} must be iterable (e.g. a paddle.io.DataLoader), got {type(dataloader).__name__}.")

    @property
    def model_device(self) -> str:
        return self._device

    @property
    def data_device(self) -> str:
        return self._data_device

    @property
    def needs_data_move(self) -> bool:
        # Paddle's DataLoader puts batches on the current device, which setup() made ours.
        return self._data_device != self._device

    # ------------------------------------------------------------------ forward / backward
    def get_model_call_fn(self, fn_name: str, for_training: bool = True
                          ) -> tuple[Callable[..., Any], Optional[Callable[..., Any]]]:
        return single_process_call(self.model, fn_name)

    def set_model_mode(self, mode: str) -> None:
        if mode not in ("train", "eval"):
            raise ValueError(f"mode must be 'train' or 'eval', got {mode!r}.")
        if mode == "train":
            self.model.train()
        else:
            self.model.eval()

    def evaluate_context(self) -> ContextManager[Any]:
        return paddle.no_grad()

    def zero_grad(self) -> None:
        for optimizer in self.optimizers:
            optimizer.clear_grad(set_to_zero=self._set_grad_to_zero)

    def move_data_to_device(self, batch: Any) -> Any:
        return move_to_device(batch, self._data_device)

    def tensor_to_numeric(self, value: Any) -> Any:
        return to_numeric(value)

    # ------------------------------------------------------------------ data
    def get_dataloader_args(self, dataloader: Any) -> Any:
        return paddle_dataloader.get_dataloader_args(dataloader)

    def replace_batch_sampler(self, dataloader: Any, batch_sampler: Any) -> Any:
        return paddle_dataloader.replace_batch_sampler(dataloader, batch_sampler)

    # ------------------------------------------------------------------ persistence
    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """``paddle.save`` of the state dict; ``only_state_dict=False`` with an ``input_spec``
        (keyword here, or ``paddle_kwargs``) makes ``path`` a folder that also holds the
        ``paddle.jit.save`` export."""
        input_spec = kwargs.pop("input_spec", self._input_spec)
        save_model_file(self.unwrap_model(), Path(path), whole_model=not only_state_dict,
                        input_spec=input_spec, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        load_model_file(self.unwrap_model(), Path(path), **kwargs)

    def save_training_state(self, path: Path) -> None:
        paddle.save(self.training_state([save_optimizer_state(optimizer) for optimizer in self.optimizers]), str(path))

    def load_training_state(self, path: Path) -> None:
        self.restore_training_state(paddle.load(str(path)), load_optimizer_state)

    def get_rng_state(self) -> dict[str, Any]:
        return get_rng_state()

    def set_rng_state(self, state: dict[str, Any]) -> None:
        set_rng_state(state)
