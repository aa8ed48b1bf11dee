"""Backward, step and gradient clipping for drivers whose framework follows torch's conventions
(torch, paddle, oneflow).

Those frameworks share the shapes this needs: a grad scaler with ``scale(loss)``,
``step(optimizer)``, ``update()`` and ``unscale_(optimizer)``, and ``clip_grad_norm_(parameters,
max_norm, norm_type)`` / ``clip_grad_value_(parameters, value)`` utilities. The mixed-precision
bookkeeping (scale the loss, unscale once per step before clipping so that the scaler's ``step``
does not unscale again) is written here once; a backend supplies its scaler (or None) and names
its framework's utilities in :meth:`GradScaling.clip_utilities`.
"""
from __future__ import annotations

from typing import Any, Iterable


class GradScaling:
    """Mixin for a :class:`~fastcore_train.drivers.Driver` with ``grad_scaler`` (or None) and
    ``optimizers``: its ``backward``, ``step`` and clipping."""

    grad_scaler: Any
    optimizers: list[Any]
    _grads_unscaled = False  # this step's gradients were unscaled for clipping

    def clip_utilities(self) -> Any:
        """The framework's module holding ``clip_grad_norm_`` and ``clip_grad_value_``."""
        raise NotImplementedError

    def clip_parameters(self) -> Iterable[Any]:
        """The parameters whose gradients are clipped: the user's model's."""
        return self.unwrap_model().parameters()  # type: ignore[attr-defined]

    def backward(self, loss: Any) -> None:
        if self.grad_scaler is not None:
            self.grad_scaler.scale(loss).backward()
        else:
            loss.backward()

    def step(self) -> None:
        """Step every optimizer (through the scaler, which skips steps with inf/NaN gradients)."""
        scaler = self.grad_scaler
        if scaler is None:
            for optimizer in self.stepping_optimizers():
                optimizer.step()
        else:
            for optimizer in self.stepping_optimizers():
                scaler.step(optimizer)  # skips unscaling what unscale_gradients already unscaled
            scaler.update()
        self._grads_unscaled = False  # the next step's gradients are scaled again

    def stepping_optimizers(self) -> list[Any]:
        """The optimizer objects ``step`` hands to the grad scaler (it keys its state by them)."""
        return self.optimizers

    def unscale_gradients(self) -> None:
        """Divide the gradients by the grad scaler's scale, once per step, so that clipping sees
        their true size; the scaler records it per optimizer and its ``step`` does not unscale again."""
        scaler = self.grad_scaler
        if scaler is None or self._grads_unscaled:
            return
        if not hasattr(scaler, "unscale_"):
            raise NotImplementedError(
                f"{type(scaler).__name__} has no unscale_(), so gradients scaled for mixed precision cannot be "
                "clipped at their true size; train with fp16=False to clip gradients.")
        for optimizer in self.stepping_optimizers():
            scaler.unscale_(optimizer)
        self._grads_unscaled = True

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> Any:
        self.unscale_gradients()
        return self.clip_utilities().clip_grad_norm_(self.clip_parameters(), max_norm, norm_type)

    def clip_grad_value(self, clip_value: float) -> None:
        self.unscale_gradients()
        self.clip_utilities().clip_grad_value_(self.clip_parameters(), clip_value)
