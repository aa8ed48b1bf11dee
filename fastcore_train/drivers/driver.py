"""The ``Driver`` interface: everything framework-specific the controller asks for.

The Trainer and Evaluator never touch a framework; they call these methods. A backend implements
them with its framework's own facilities. Defaults here are the single-process answers, so a
single-process driver only overrides what its framework does differently.
"""
from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Optional

from fastcore_train.drivers.precision import GRAD_SCALER_KEY, Precision

if TYPE_CHECKING:
    from fastcore_train.parallel.launcher import Launcher
    from fastcore_train.samplers.adapt import DataLoaderArgs


class Driver(ABC):
    """Framework-specific operations used by the controller.

    Class attributes a backend sets: ``backend`` (its registry name) and ``model_file_suffix``
    (the file extension its ``save_model`` writes, e.g. ``.pt``). ``precision`` (a
    :class:`~fastcore_train.drivers.precision.Precision`, full precision unless the backend sets
    its own) runs the forward's autocast, the backward, the steps and gradient clipping.
    """

    backend: str = ""
    model_file_suffix: str = ""
    #: True when saving is a collective operation (sharded models): the controller then calls
    #: ``save_model``/``save_training_state`` on every rank and the driver decides who writes.
    collective_save: bool = False

    def __init__(self, model: Any, fp16: bool = False, **kwargs: Any) -> None:
        self.model = model
        self.fp16 = fp16
        self.optimizers: list[Any] = []
        self.precision: Precision = Precision()
        #: How this job's ranks start (:mod:`fastcore_train.parallel.launcher`); chosen with the
        #: driver, from ``device=``. None: every rank is already running (or there is one).
        self.launcher: Optional["Launcher"] = None
        self._is_set_up = False

    def ensure_setup(self) -> None:
        """Once, whoever (Trainer or a standalone Evaluator) gets there first: start the other
        ranks if this process must (the launcher), then :meth:`setup`."""
        if not self._is_set_up:
            if self.launcher is not None:
                self.launcher.launch()
            self.setup()
            self._is_set_up = True

    # ------------------------------------------------------------------ set-up and facts
    @abstractmethod
    def setup(self) -> None:
        """Move the model to its device, build scalers or process groups; called once."""

    def set_optimizers(self, optimizers: Any) -> None:
        """Accept one optimizer or a sequence of them, checking each belongs to the framework."""
        if optimizers is None:
            raise ValueError("optimizers is required: pass an optimizer (or a list of them) to train.")
        listed = list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
        for optimizer in listed:
            self.check_optimizer(optimizer)
        self.optimizers = listed

    @abstractmethod
    def check_optimizer(self, optimizer: Any) -> None:
        """Raise a clear TypeError when ``optimizer`` is not an optimizer of this framework."""

    @abstractmethod
    def check_dataloader(self, dataloader: Any, name: str) -> None:
        """Raise a clear TypeError when ``dataloader`` cannot be iterated as this driver needs."""

    def is_distributed(self) -> bool:
        return False

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    @property
    def local_rank(self) -> int:
        return 0

    def is_global_zero(self) -> bool:
        return self.rank == 0

    @property
    @abstractmethod
    def model_device(self) -> Any:
        """Where the model's parameters live."""

    @property
    def data_device(self) -> Any:
        """Where batches are moved before the forward; the model's device unless told otherwise."""
        return self.model_device

    def unwrap_model(self) -> Any:
        """The user's model, without any wrapper the driver put around it."""
        return self.model

    def full_params(self) -> ContextManager[Any]:
        """A context in which ``unwrap_model()`` holds whole weights (sharded drivers gather them)."""
        return contextlib.nullcontext()

    #: The precision's grad scaler (None without one); assigning it sets the precision's.
    grad_scaler = property(lambda self: self.precision.scaler,
                           lambda self, scaler: setattr(self.precision, "scaler", scaler))

    # ------------------------------------------------------------------ forward / backward
    @abstractmethod
    def get_model_call_fn(self, fn_name: str, for_training: bool = True
                          ) -> tuple[Callable[..., Any], Optional[Callable[..., Any]]]:
        """Return ``(fn, signature_fn)`` for the model method ``fn_name``.

        When the model has no such method and ``fn_name`` is the default (``train_step`` or
        ``evaluate_step``), fall back to the framework's forward call. ``for_training`` tells a
        distributed driver to route the call through its gradient-synchronising wrapper.
        """

    @abstractmethod
    def set_model_mode(self, mode: str) -> None:
        """``"train"`` or ``"eval"``."""

    @abstractmethod
    def evaluate_context(self) -> ContextManager[Any]:
        """A context in which no gradient is recorded."""

    def auto_cast(self) -> ContextManager[Any]:
        """Mixed-precision context for the forward (the precision's); a null context unless ``fp16``."""
        return self.precision.forward_context()

    def no_sync(self) -> ContextManager[Any]:
        """Context that skips gradient synchronisation (non-final accumulation micro-steps)."""
        return contextlib.nullcontext()

    def backward(self, loss: Any) -> None:
        """Backward of the loss, through the precision (which scales it for mixed precision)."""
        self.precision.backward(loss)

    def step(self) -> None:
        """Step every optimizer, through the precision (its scaler skips inf/NaN steps)."""
        self.precision.step(self.stepping_optimizers())

    def stepping_optimizers(self) -> list[Any]:
        """The optimizer objects that are stepped (and unscaled before clipping): ``optimizers``,
        unless the driver steps wrappers of them."""
        return self.optimizers

    @abstractmethod
    def zero_grad(self) -> None:
        """Clear every optimizer's gradients."""

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> Any:
        """Scale all model gradients in place so that their global ``norm_type``-norm is at most
        ``max_norm``; return that norm before clipping as the framework's scalar tensor (read it
        with :meth:`tensor_to_numeric`; it stays on the device so that clipping never waits for it).

        Called between backward and step, so it sees the synchronised (all-reduced) gradients
        of a distributed job and every rank clips alike; gradients of a grad scaler are unscaled
        first. By default the precision does both, with its framework's clipping utilities.
        """
        return self.precision.clip_grad_norm(self.unwrap_model().parameters(), max_norm, norm_type,
                                             self.stepping_optimizers())

    def clip_grad_value(self, clip_value: float) -> None:
        """Clamp every element of every model gradient to ``[-clip_value, clip_value]`` in place
        (after unscaling, on synchronised gradients, as :meth:`clip_grad_norm`)."""
        self.precision.clip_grad_value(self.unwrap_model().parameters(), clip_value, self.stepping_optimizers())

    @abstractmethod
    def move_data_to_device(self, batch: Any) -> Any:
        """Move every tensor in a (nested) batch to ``data_device``."""

    @property
    def needs_data_move(self) -> bool:
        """False when batches are already where the model wants them, so the loop skips moving."""
        return True

    @abstractmethod
    def tensor_to_numeric(self, value: Any) -> Any:
        """A tensor (or nested container of them) as python numbers, for logs and results."""

    # ------------------------------------------------------------------ data
    def set_sampler_epoch(self, dataloader: Any, epoch: int) -> None:
        """Tell the dataloader's (batch) sampler which epoch starts (reshuffles seeded samplers)."""
        for sampler in (self.get_batch_sampler(dataloader), getattr(dataloader, "sampler", None)):
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
                return

    def dataloader_length(self, dataloader: Any) -> Optional[int]:
        """Batches per epoch, or None for an unsized iterable."""
        try:
            return len(dataloader)
        except TypeError:
            return None

    def get_dataloader_args(self, dataloader: Any) -> Optional["DataLoaderArgs"]:
        """What the dataloader samples and how (for swapping in a reproducible sampler).

        None when this kind of dataloader cannot take another batch sampler.
        """
        return None

    def replace_batch_sampler(self, dataloader: Any, batch_sampler: Any) -> Any:
        """A new dataloader like ``dataloader`` but drawing batches from ``batch_sampler``.

        The user's dataloader is left untouched and usable.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot replace a dataloader's batch sampler.")

    def get_batch_sampler(self, dataloader: Any) -> Any:
        """The batch sampler a dataloader draws from, or None."""
        return getattr(dataloader, "batch_sampler", None)

    # ------------------------------------------------------------------ persistence
    @abstractmethod
    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Write the (unwrapped) model to the file ``path``."""

    @abstractmethod
    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Restore the model from the file ``path`` written by :meth:`save_model`."""

    @abstractmethod
    def save_training_state(self, path: Path) -> None:
        """Write optimizer state (and the precision's scaler state, under
        :data:`~fastcore_train.drivers.precision.GRAD_SCALER_KEY`) to the file ``path``."""

    @abstractmethod
    def load_training_state(self, path: Path) -> None:
        """Restore what :meth:`save_training_state` wrote."""

    def training_state(self, optimizer_states: list[Any]) -> dict[str, Any]:
        """The training state a driver writes: its optimizers' states, then the precision's
        scaler state (None without a scaler)."""
        return {"optimizers": optimizer_states, GRAD_SCALER_KEY: self.precision.state_dict()}

    def restore_training_state(self, state: dict[str, Any],
                               load_optimizer: Optional[Callable[[Any, Any], None]] = None) -> None:
        """Restore a :meth:`training_state`: each optimizer's with ``load_optimizer(optimizer,
        saved)`` (default ``optimizer.load_state_dict(saved)``), then the scaler's, if any."""
        saved = state["optimizers"]
        self.check_optimizer_count(len(saved))
        for optimizer, optimizer_state in zip(self.optimizers, saved):
            if load_optimizer is None:
                optimizer.load_state_dict(optimizer_state)
            else:
                load_optimizer(optimizer, optimizer_state)
        self.precision.load_state_dict(state.get(GRAD_SCALER_KEY))

    def check_optimizer_count(self, saved: int) -> None:
        """A ValueError unless a checkpoint's ``saved`` optimizer states match ``optimizers``."""
        if saved != len(self.optimizers):
            raise ValueError(
                f"The checkpoint holds {saved} optimizer state(s) but the trainer has "
                f"{len(self.optimizers)} optimizer(s); pass the same optimizers as when it was saved.")

    @abstractmethod
    def get_rng_state(self) -> Any:
        """The framework's random state (CPU and device generators) as JSON-able data."""

    @abstractmethod
    def set_rng_state(self, state: Any) -> None:
        """Restore what :meth:`get_rng_state` returned."""

    # ------------------------------------------------------------------ collectives
    def barrier(self) -> None:
        """Wait for every rank; nothing to wait for in one process."""

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Rank ``src``'s ``obj`` on every rank."""
        return obj

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order."""
        return [obj]

    def on_exception(self, exception: BaseException) -> None:
        """Called when training raises: in a distributed job, stop every rank (so none waits
        forever in a collective for this one), as the launcher that started them knows how."""
        if self.is_distributed():
            from fastcore_train.parallel.launcher import AlreadyLaunched

            (self.launcher or AlreadyLaunched()).stop_after_failure(self.rank, exception)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.model_device!s}, fp16={self.fp16})"

