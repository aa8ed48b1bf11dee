"""``JittorSingleDriver``: one process, on the CPU or jittor's GPU."""
from __future__ import annotations

from typing import Any, Callable, ContextManager, Optional

import jittor as jt

from fastcore_train.backends.jittor.dataloader import JittorData
from fastcore_train.backends.jittor.devices import parse_device, use_device
from fastcore_train.backends.jittor.persistence import JittorPersistence
from fastcore_train.backends.jittor.precision import JittorPrecision
from fastcore_train.backends.jittor.rng import StepSeeder
from fastcore_train.drivers.backend_options import check_backend_options
from fastcore_train.drivers.driver import Driver
from fastcore_train.parallel.placement import device_name

_JITTOR_KWARGS = {"amp_level"}



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
    _optimizer_type = jt.optim.Optimizer
    _optimizer_name = "jittor.optim.Optimizer"

    def __init__(self, model: jt.Module, device: Any = "cpu", fp16: bool = False,
                 jittor_kwargs: Optional[dict[str, Any]] = None, data_device: Any = None, **kwargs: Any) -> None:
        super().__init__(model, fp16=fp16)
        jittor_kwargs = check_backend_options("jittor_kwargs", jittor_kwargs, _JITTOR_KWARGS)
        self._device = parse_device(device)
        if data_device is not None and device_name(data_device).split(":")[0] != device_name(self._device):
            raise ValueError(f"data_device={data_device!r} differs from the model's device {self._device!r}, but jittor "
                             "keeps every variable on the one device of the process (jt.flags.use_cuda); remove "
                             "data_device, or pass the same device as device=.")
        self.precision: JittorPrecision = JittorPrecision(fp16, int(jittor_kwargs.get("amp_level", 5)))
        self.data = JittorData(self._device)
        self.io = JittorPersistence(self)
        self._seeder: Optional[StepSeeder] = None

    def setup(self) -> None:
        use_device(self._device)
        self.precision.setup()
        self._seeder = StepSeeder(self.comm.rank)

    @property
    def seeder(self) -> StepSeeder:
        """The per-step reseeder of jittor's random streams (see ``rng.py``)."""
        if self._seeder is None:
            self._seeder = StepSeeder(self.comm.rank)
        return self._seeder

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
