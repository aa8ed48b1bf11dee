"""The ``Driver`` interface: everything framework-specific the controller asks for.

The Trainer and Evaluator never touch a framework; they call a Driver. A Driver is composed of
layers, each an object of its own (after Lightning Fabric's strategies):

- ``precision`` (:mod:`~fastcore_train.drivers.precision`): autocast, scaled backward, stepping
  through a grad scaler, unscale-once before clipping;
- ``launcher`` (:mod:`~fastcore_train.parallel.launcher`): how this job's ranks start;
- ``comm`` (:mod:`~fastcore_train.drivers.collectives`): this rank's facts and collectives;
- ``data`` (:mod:`~fastcore_train.drivers.data`): reading, rebuilding and moving data;
- ``io`` (:mod:`~fastcore_train.drivers.persistence`): model, training and RNG state files.

What remains on the Driver is the model and its training step. Defaults here are the
single-process answers, so a backend's single-process driver only supplies what its framework
does differently.
"""
from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Optional

from fastcore_train.drivers.collectives import Collectives
from fastcore_train.drivers.data import DataAdapter
from fastcore_train.drivers.model_calls import single_process_call
from fastcore_train.drivers.precision import Precision

if TYPE_CHECKING:
    from fastcore_train.drivers.persistence import Persistence
    from fastcore_train.parallel.launcher import Launcher


class Driver(ABC):
    """Framework-specific operations used by the controller; see the module docstring.

    A backend sets ``backend`` (its registry name) and, in its constructor, ``_device`` (its
    parsed device), ``io`` (its
    :class:`~fastcore_train.drivers.persistence.Persistence`) and, where they differ from the
    single-process defaults, ``precision``, ``comm`` and ``data``. Its optimizer class is named
    by ``_optimizer_type`` and ``_optimizer_name`` (checked by :meth:`set_optimizers`).
    """

    #: The registry name of the backend this driver belongs to.
    backend: str = ""
    #: The framework's optimizer base class and its public name; set by each backend.
    _optimizer_type: Optional[type] = None
    _optimizer_name: str = ""
    #: This rank's device as the framework names it; each backend's constructor sets it.
    _device: Any = None

    def __init__(self, model: Any, fp16: bool = False, **kwargs: Any) -> None:
        #: The model as trained: the user's, or a wrapper the driver put around it at set-up.
        self.model = model
        #: Whether mixed precision was asked for (the precision layer decides what it means here).
        self.fp16 = fp16
        #: The optimizers given to the Trainer (or the driver's replacements of them).
        self.optimizers: list[Any] = []
        #: Autocast, backward, optimizer steps and clipping, in full or mixed precision.
        self.precision: Precision = Precision()
        #: How this job's ranks start; None: every rank is already running (or there is one).
        self.launcher: Optional["Launcher"] = None
        #: This rank's facts (rank, world size) and collectives over picklable objects.
        self.comm: Collectives = Collectives()
        #: How batches are read, re-sampled, moved to the device and read back as numbers.
        self.data: DataAdapter = DataAdapter()
        #: Model, training-state and RNG-state files for checkpoints.
        self.io: "Persistence"
        self._is_set_up = False

    def __getattr__(self, name: str) -> Any:
        """fastNLP 1.0's driver names (``barrier``, ``tensor_to_numeric``, ...), answered by the
        parts; see :mod:`~fastcore_train.drivers.fastnlp_names`."""
        if name.startswith("_") or name in ("comm", "data", "io", "precision"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        from fastcore_train.drivers.fastnlp_names import resolve

        return resolve(self, name)

    # ------------------------------------------------------------------ set-up
    def ensure_setup(self) -> None:
        """Once, whoever (Trainer or a standalone Evaluator) gets there first: start the other
        ranks if this process must (the launcher), then :meth:`setup`."""
        if not self._is_set_up:
            if self.launcher is not None:
                self.launcher.launch()
            self.setup()
            self._is_set_up = True

    @abstractmethod
    def setup(self) -> None:
        """Move the model to its device, join the process group, wrap the model, build the
        grad scaler; called once, by :meth:`ensure_setup`."""

    def set_optimizers(self, optimizers: Any) -> None:
        """Accept one optimizer or a sequence of them, checking each belongs to the framework."""
        if optimizers is None:
            raise ValueError("optimizers is required: pass an optimizer (or a list of them) to train.")
        listed = list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
        expected = self._optimizer_type
        for optimizer in listed:
            if expected is not None and not isinstance(optimizer, expected):
                raise TypeError(f"The {self.backend} driver needs {self._optimizer_name} instances, got "
                                f"{type(optimizer).__name__}.")
        self.optimizers = listed

    @property
    def device(self) -> Any:
        """Where the model's parameters live (this rank's device, as the backend parsed it)."""
        return self._device

    def unwrap_model(self) -> Any:
        """The user's model, without any wrapper the driver put around it."""
        return self.model

    # ------------------------------------------------------------------ the model's calls
    def get_model_call_fn(self, fn_name: str, for_training: bool = True
                          ) -> tuple[Callable[..., Any], Optional[Callable[..., Any]]]:
        """Return ``(fn, signature_fn)`` for the model method ``fn_name``.

        When the model has no such method and ``fn_name`` is the default (``train_step`` or
        ``evaluate_step``), fall back to the framework's forward call. ``for_training`` tells a
        distributed driver to route the call through its gradient-synchronising wrapper.
        """
        return single_process_call(self.model, fn_name)

    def set_model_mode(self, mode: str) -> None:
        """``"train"`` or ``"eval"`` (dropout, batch-norm statistics)."""
        if mode not in ("train", "eval"):
            raise ValueError(f"mode must be 'train' or 'eval', got {mode!r}.")
        if mode == "train":
            self.model.train()
        else:
            self.model.eval()

    # ------------------------------------------------------------------ data
    def data_shard(self) -> tuple[int, int]:
        """``(number of data shards, this rank's shard)`` for the samplers: the world size and rank,
        unless several ranks compute on the same batches (tensor parallel: the data-parallel size
        and rank); evaluation and prediction then run the whole dataloader on every rank."""
        return self.comm.world_size, self.comm.rank

    @abstractmethod
    def evaluate_context(self) -> ContextManager[Any]:
        """A context in which no gradient is recorded."""

    # ------------------------------------------------------------------ the training step
    def no_sync(self) -> ContextManager[Any]:
        """Context that skips gradient synchronisation (non-final accumulation micro-steps)."""
        return contextlib.nullcontext()

    def backward(self, loss: Any) -> None:
        """Backward of the loss, through the precision (which scales it for mixed precision)."""
        self.precision.backward(loss)

    def step(self) -> None:
        """Step every optimizer, through the precision (its scaler skips inf/NaN steps)."""
        self.precision.step(self._stepping_optimizers())

    @abstractmethod
    def zero_grad(self) -> None:
        """Clear every optimizer's gradients."""

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> Any:
        """Scale all model gradients in place so that their global ``norm_type``-norm is at most
        ``max_norm``; return that norm before clipping as the framework's scalar tensor (read it
        with ``data.to_numeric``; it stays on the device so that clipping never waits for it).

        Called between backward and step, so it sees the synchronised (all-reduced) gradients
        of a distributed job and every rank clips alike; gradients of a grad scaler are unscaled
        first. By default the precision does both, with its framework's clipping utilities.
        """
        return self.precision.clip_grad_norm(self.unwrap_model().parameters(), max_norm, norm_type,
                                             self._stepping_optimizers())

    def clip_grad_value(self, clip_value: float) -> None:
        """Clamp every element of every model gradient to ``[-clip_value, clip_value]`` in place
        (after unscaling, on synchronised gradients, as :meth:`clip_grad_norm`)."""
        self.precision.clip_grad_value(self.unwrap_model().parameters(), clip_value, self._stepping_optimizers())

    def _stepping_optimizers(self) -> list[Any]:
        """The optimizer objects that are stepped (and unscaled before clipping): ``optimizers``,
        unless the driver steps wrappers of them."""
        return self.optimizers

    # ------------------------------------------------------------------ failures
    def on_exception(self, exception: BaseException) -> None:
        """Called when training raises: in a distributed job, stop every rank (so none waits
        forever in a collective for this one), as the launcher that started them knows how."""
        if self.comm.is_distributed():
            from fastcore_train.parallel.launcher import AlreadyLaunched

            (self.launcher or AlreadyLaunched()).stop_after_failure(self.comm.rank, exception)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.device!s}, fp16={self.fp16})"
