"""``JittorSingleDriver``: one process, on the CPU or jittor's GPU."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

import jittor as jt

from fastcore_train.backends.jittor import dataloader as jittor_dataloader
from fastcore_train.backends.jittor.devices import parse_device, use_device
from fastcore_train.backends.jittor.precision import JittorPrecision
from fastcore_train.backends.jittor.rng import StepSeeder
from fastcore_train.backends.jittor.tensors import to_numeric
from fastcore_train.drivers.driver import Driver
from fastcore_train.parallel.placement import device_name

_JITTOR_KWARGS = {"amp_level"}
TRAINING_STATE_FORMAT = "fastcore_train.jittor.training_state.v1"


def check_jittor_kwargs(jittor_kwargs: Optional[dict[str, Any]], accepted: set[str]) -> dict[str, Any]:
    """A copy of ``jittor_kwargs``; unknown keys are a TypeError listing the accepted ones."""
    jittor_kwargs = dict(jittor_kwargs or {})
    unknown = set(jittor_kwargs) - accepted
    if unknown:
        raise TypeError(f"Unknown jittor_kwargs {sorted(unknown)}; accepted: {sorted(accepted)}.")
    return jittor_kwargs


def optimizer_state(optimizer: jt.optim.Optimizer) -> dict[str, Any]:
    """``optimizer.state_dict()`` without the parameters and gradients its groups also hold
    (``load_state_dict`` ignores the parameters; pending gradients are not training state)."""
    state = optimizer.state_dict()
    defaults = dict(state["defaults"])
    if "param_groups" in defaults:
        defaults["param_groups"] = [{key: value for key, value in group.items() if key not in ("params", "grads")}
                                    for group in defaults["param_groups"]]
    return {**state, "defaults": defaults}


def load_optimizer_state(optimizer: jt.optim.Optimizer, state: dict[str, Any]) -> None:
    """Restore what :func:`optimizer_state` returned; the gradients saved with it are not pending ones."""
    optimizer.load_state_dict(state)
    optimizer.zero_grad()


class JittorSingleDriver(Driver):
    """Trains a ``jittor.Module`` in this process.

    Jittor's optimizers compute gradients themselves: :meth:`backward` is ``opt.backward(loss)``
    for every optimizer (gradients add up until a step, so accumulation works) and :meth:`step`
    (the precision's, without a scaler) is ``opt.step()``, which also clears them (jittor has no
    step without clearing). ``fp16=True`` sets ``jt.flags.auto_mixed_precision_level``
    (``jittor_kwargs={"amp_level": N}``, default 5) around the forward
    (:class:`~fastcore_train.backends.jittor.precision.JittorPrecision`). Random streams are
    reseeded per training step (see ``rng.py``) so that a checkpoint can restore them.
    """

    backend = "jittor"
    model_file_suffix = ".pkl"

    def __init__(self, model: jt.Module, device: Any = "cpu", fp16: bool = False,
                 jittor_kwargs: Optional[dict[str, Any]] = None, data_device: Any = None, **kwargs: Any) -> None:
        super().__init__(model, fp16=fp16)
        jittor_kwargs = check_jittor_kwargs(jittor_kwargs, _JITTOR_KWARGS)
        self._device = parse_device(device)
        if data_device is not None and device_name(data_device).split(":")[0] != device_name(self._device):
            raise ValueError(f"data_device={data_device!r} differs from the model's device {self._device!r}, but jittor "
                             "keeps every variable on the one device of the process (jt.flags.use_cuda); remove "
                             "data_device, or pass the same device as device=.")
        self.precision: JittorPrecision = JittorPrecision(fp16, int(jittor_kwargs.get("amp_level", 5)))
        self._seeder: Optional[StepSeeder] = None

    # ------------------------------------------------------------------ set-up and facts
    def setup(self) -> None:
        use_device(self._device)
        self.precision.setup()
        self._seeder = StepSeeder(self.rank)

    @property
    def seeder(self) -> StepSeeder:
        if self._seeder is None:
            self._seeder = StepSeeder(self.rank)
        return self._seeder

    def check_optimizer(self, optimizer: Any) -> None:
        if not isinstance(optimizer, jt.optim.Optimizer):
            raise TypeError(f"The jittor driver needs jittor.optim.Optimizer instances, got {type(optimizer).__name__}.")

    def check_dataloader(self, dataloader: Any, name: str) -> None:
        if not hasattr(dataloader, "__iter__"):
            raise TypeError(f"{name} must be iterable (e.g. a jittor.dataset.Dataset with set_attrs(batch_size=...)), "
                            f"got {type(dataloader).__name__}.")

    @property
    def model_device(self) -> str:
        return self._device

    @property
    def needs_data_move(self) -> bool:
        return False  # jittor Vars live wherever jt.flags.use_cuda says; there is nothing to move

    # ------------------------------------------------------------------ forward / backward
    def _model_method(self, fn_name: str) -> tuple[Callable[..., Any], Optional[Callable[..., Any]]]:
        model = self.unwrap_model()
        method = getattr(model, fn_name, None)
        if callable(method):
            return method, method
        if fn_name in ("train_step", "evaluate_step"):
            return model, model.execute
        raise ValueError(f"The model ({type(model).__name__}) has no method {fn_name!r} to call.")

    def get_model_call_fn(self, fn_name: str, for_training: bool = True
                          ) -> tuple[Callable[..., Any], Optional[Callable[..., Any]]]:
        fn, signature = self._model_method(fn_name)
        if not for_training:
            return fn, signature
        seeder = self.seeder

        def training_call(*args: Any, **kwargs: Any) -> Any:
            seeder.before_step()
            return fn(*args, **kwargs)

        return training_call, signature

    def set_model_mode(self, mode: str) -> None:
        if mode not in ("train", "eval"):
            raise ValueError(f"mode must be 'train' or 'eval', got {mode!r}.")
        if mode == "train":
            self.unwrap_model().train()
        else:
            self.unwrap_model().eval()

    def evaluate_context(self) -> ContextManager[Any]:
        return jt.no_grad()

    def backward(self, loss: jt.Var) -> None:
        last = len(self.optimizers) - 1
        for index, optimizer in enumerate(self.optimizers):
            optimizer.backward(loss, retain_graph=index < last)

    def zero_grad(self) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad()

    # ------------------------------------------------------------------ gradient clipping
    def _pending_gradients(self) -> list[tuple[jt.optim.Optimizer, list[jt.Var]]]:
        """Each optimizer holding gradients since its last step, with those gradients.

        Jittor keeps gradients in the optimizer's ``param_groups[i]["grads"]`` (stale after a
        step until the next backward); under MPI they were averaged across ranks inside
        ``optimizer.backward``, so clipping them acts alike on every rank.
        """
        pending = []
        for optimizer in self.optimizers:
            if getattr(optimizer, "_Optimizer__zero_grad", False):  # jittor's "no backward since the step"
                continue
            grads = [grad for group in optimizer.param_groups
                     for param, grad in zip(group["params"], group.get("grads", ())) if not param.is_stop_grad()]
            pending.append((optimizer, grads))
        return pending

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> Any:
        """The optimizer's own ``clip_grad_norm`` (1- or 2-norm, jittor's choice); with several
        optimizers their gradients are scaled together by jittor's formula, by their global norm."""
        if norm_type not in (1, 2):
            raise ValueError(f"jittor clips gradients by their 1- or 2-norm only, got norm_type={norm_type!r}.")
        pending = self._pending_gradients()
        grads = [grad for _, grads in pending for grad in grads]
        if not grads:
            return jt.zeros(())
        total = jt.norm(jt.concat([grad.flatten() for grad in grads]), int(norm_type))
        if len(pending) == 1:
            pending[0][0].clip_grad_norm(max_norm, int(norm_type))
        else:
            coefficient = jt.minimum(max_norm / (total + 1e-6), 1.0)
            for grad in grads:
                grad.update(grad * coefficient)
        return total

    def clip_grad_value(self, clip_value: float) -> None:
        """``Var.clamp`` of each pending gradient (jittor's optimizers have no value clipping)."""
        for _, grads in self._pending_gradients():
            for grad in grads:
                grad.update(grad.clamp(-clip_value, clip_value))

    def move_data_to_device(self, batch: Any) -> Any:
        return batch

    def tensor_to_numeric(self, value: Any) -> Any:
        return to_numeric(value)

    # ------------------------------------------------------------------ data
    def get_dataloader_args(self, dataloader: Any) -> Any:
        return jittor_dataloader.get_dataloader_args(dataloader)

    def replace_batch_sampler(self, dataloader: Any, batch_sampler: Any) -> Any:
        return jittor_dataloader.replace_batch_sampler(dataloader, batch_sampler)

    # ------------------------------------------------------------------ persistence
    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """``jt.save`` of the state dict (numpy arrays), or of the whole model when ``only_state_dict=False``."""
        jt.sync_all()
        model = self.unwrap_model()
        jt.save(model.state_dict() if only_state_dict else model, str(path), **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        loaded = jt.load(str(path), **kwargs)
        if isinstance(loaded, jt.Module):
            loaded = loaded.state_dict()
        if not isinstance(loaded, dict):
            raise TypeError(f"{str(path)!r} holds a {type(loaded).__name__}, not a jittor model or state dict.")
        model = self.unwrap_model()
        expected = set(model.state_dict())
        missing, unexpected = sorted(expected - set(loaded)), sorted(set(loaded) - expected)
        if missing or unexpected:
            raise ValueError(f"{str(path)!r} does not fit the model {type(model).__name__}: missing {missing}, "
                             f"unexpected {unexpected}. Load it into a model of the same structure as the one saved.")
        model.load_state_dict(loaded)
        jt.sync_all()

    def save_training_state(self, path: Path) -> None:
        jt.sync_all()
        jt.save({"format": TRAINING_STATE_FORMAT,
                 "optimizers": [optimizer_state(optimizer) for optimizer in self.optimizers]}, str(path))

    def load_training_state(self, path: Path) -> None:
        state = jt.load(str(path))
        if not isinstance(state, dict) or state.get("format") != TRAINING_STATE_FORMAT:
            raise ValueError(f"{str(path)!r} was not written by fastcore_train's jittor driver.")
        self.restore_training_state(state, load_optimizer_state)  # jittor has no scaler state to restore
        jt.sync_all()

    def get_rng_state(self) -> dict[str, Any]:
        return self.seeder.state()

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self.seeder.load(state)
