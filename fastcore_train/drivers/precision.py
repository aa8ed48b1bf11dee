"""Precision: how a driver runs the forward, the backward, the optimizer steps and gradient
clipping in full or mixed precision, as a layer of its own (after Lightning's precision plugins).

A driver holds one :class:`Precision` (``driver.precision``) and its ``auto_cast``, ``backward``,
``step``, ``clip_grad_norm``/``clip_grad_value`` and training-state checkpoints go through it.
This module imports no framework: it writes once the bookkeeping every framework with a
torch-style grad scaler shares (torch, paddle, oneflow): scale the loss for the backward, step
the optimizers through the scaler (which skips a step whose gradients hold inf/NaN, then updates
its scale), unscale the gradients once per step before clipping, keep the scaler's state for
checkpoints, and, for ``fp16=True``, autocast the forward and build the scaler where mixed
precision runs (warning once where it does not). Each backend's ``backends/<name>/precision.py``
supplies only its framework's calls: the autocast context, the scaler it builds, the devices
mixed precision runs on, and its clipping utilities.

With ``fp16=False`` (the default) this is full precision: the forward runs as it is, losses are
not scaled, there is no scaler.
"""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Iterable, Optional, Sequence

from fastcore_train.log import logger

#: The key of the scaler's state in a driver's training-state file (None when there is no scaler).
GRAD_SCALER_KEY = "grad_scaler"


class Precision:
    """Full precision unless ``fp16``, and the bookkeeping a backend's mixed precision builds on.

    ``scaler`` is None or a grad scaler with torch's interface: ``scale(loss)``,
    ``step(optimizer)``, ``update()``, ``unscale_(optimizer)``, ``state_dict()`` and
    ``load_state_dict(state)``, built by :meth:`new_scaler` at set-up (from ``gradscaler_kwargs``,
    the user's options for it). A backend names its autocast in :meth:`autocast`, the devices it
    runs on in :meth:`available` and its framework's clipping module in :meth:`clip_utilities`.
    """

    #: Logged at set-up when ``fp16`` is asked for where :meth:`available` is False.
    unavailable_warning = "fp16=True does nothing here, so this run trains in full precision."

    def __init__(self, fp16: bool = False, gradscaler_kwargs: Optional[dict[str, Any]] = None) -> None:
        self.fp16 = fp16
        self.gradscaler_kwargs = dict(gradscaler_kwargs or {})
        self.scaler: Optional[Any] = None
        self._grads_unscaled = False  # this step's gradients were unscaled for clipping

    def available(self) -> bool:
        """Whether mixed precision runs where this driver trains (its device)."""
        return True

    def new_scaler(self) -> Optional[Any]:
        """The grad scaler mixed precision trains with, or None when it needs none."""
        return None

    def autocast(self) -> ContextManager[Any]:
        """The framework's mixed-precision context for the forward."""
        return contextlib.nullcontext()

    def setup(self) -> None:
        """Build the scaler once the driver's device (and process group) is ready, or warn that
        ``fp16`` does nothing here; called from the driver's ``setup``."""
        if not self.fp16:
            return
        if self.available():
            self.scaler = self.new_scaler()
        else:
            logger.warning(self.unavailable_warning)

    def forward_context(self) -> ContextManager[Any]:
        """The context the forward runs in (the driver's ``auto_cast``): :meth:`autocast` when
        mixed precision is on and available, else a null context."""
        if self.fp16 and self.available():
            return self.autocast()
        return contextlib.nullcontext()

    def backward(self, loss: Any) -> None:
        """Backward of the loss, scaled when there is a scaler."""
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def step(self, optimizers: Sequence[Any]) -> None:
        """Step every optimizer; through the scaler, which skips steps with inf/NaN gradients."""
        scaler = self.scaler
        if scaler is None:
            for optimizer in optimizers:
                optimizer.step()
        else:
            for optimizer in optimizers:
                scaler.step(optimizer)  # skips unscaling what unscale_gradients already unscaled
            scaler.update()
        self._grads_unscaled = False  # the next step's gradients are scaled again

    def unscale_gradients(self, optimizers: Sequence[Any]) -> None:
        """Divide the gradients by the scaler's scale, once per step, so that clipping sees their
        true size; the scaler records it per optimizer and its ``step`` does not unscale again.
        ``optimizers`` must be the objects :meth:`step` is given (the scaler keys its state by them)."""
        scaler = self.scaler
        if scaler is None or self._grads_unscaled:
            return
        if not hasattr(scaler, "unscale_"):
            raise NotImplementedError(
                f"{type(scaler).__name__} has no unscale_(), so gradients scaled for mixed precision cannot be "
                "clipped at their true size; train with fp16=False to clip gradients.")
        for optimizer in optimizers:
            scaler.unscale_(optimizer)
        self._grads_unscaled = True

    def clip_utilities(self) -> Any:
        """The framework's module with torch-style ``clip_grad_norm_(parameters, max_norm,
        norm_type)`` and ``clip_grad_value_(parameters, value)``, or None (no clipping)."""
        return None

    def clip_grad_norm(self, parameters: Iterable[Any], max_norm: float, norm_type: float,
                       optimizers: Sequence[Any]) -> Any:
        """Unscale (once per step), then clip ``parameters``' gradients to a global norm of at
        most ``max_norm``; return their norm before clipping (a framework tensor)."""
        utilities = self._utilities("by norm")
        self.unscale_gradients(optimizers)
        return utilities.clip_grad_norm_(parameters, max_norm, norm_type)

    def clip_grad_value(self, parameters: Iterable[Any], clip_value: float, optimizers: Sequence[Any]) -> None:
        """Unscale (once per step), then clamp every gradient element to ``[-clip_value, clip_value]``."""
        utilities = self._utilities("by value")
        self.unscale_gradients(optimizers)
        utilities.clip_grad_value_(parameters, clip_value)

    def _utilities(self, how: str) -> Any:
        utilities = self.clip_utilities()
        if utilities is None:
            raise NotImplementedError(f"{type(self).__name__} cannot clip gradients {how}.")
        return utilities

    def state_dict(self) -> Optional[dict[str, Any]]:
        """The scaler's state for a checkpoint, or None without a scaler."""
        return self.scaler.state_dict() if self.scaler is not None else None

    def load_state_dict(self, state: Optional[dict[str, Any]]) -> None:
        """Restore what :meth:`state_dict` returned; None (or no scaler here) changes nothing."""
        if self.scaler is not None and state is not None:
            self.scaler.load_state_dict(state)
