"""What each backend supplies to the driver conformance suite, in its own framework.

Weights travel as numpy in one canonical layout (``w1`` [in, hidden], ``b1``, ``w2`` [hidden, out],
``b2``) so that every backend starts from the same numbers and results compare across backends.
The model is ``x -> linear -> relu (-> dropout) -> linear``; ``train_step(x, y)`` returns
``{"loss": cross_entropy}`` and ``evaluate_step(x)`` returns ``{"pred": logits}``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional

import numpy as np

IN, HIDDEN, OUT = 6, 16, 4


def initial_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.normal(0, 0.5, (IN, HIDDEN)).astype(np.float32),
        "b1": rng.normal(0, 0.1, (HIDDEN,)).astype(np.float32),
        "w2": rng.normal(0, 0.5, (HIDDEN, OUT)).astype(np.float32),
        "b2": rng.normal(0, 0.1, (OUT,)).astype(np.float32),
    }


def make_data(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1, (n, IN)).astype(np.float32), rng.integers(0, OUT, n).astype(np.int64)


def numpy_logits(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The model's forward in numpy, for hand-computed expectations."""
    hidden = np.maximum(x @ weights["w1"] + weights["b1"], 0)
    return hidden @ weights["w2"] + weights["b2"]


class BackendHarness(ABC):
    """Framework-specific pieces of the conformance tests."""

    driver_name: str
    #: Activation checkpointing here: "exact" (any layer, dropout replayed), "no_dropout" (layers
    #: that draw random numbers are refused), "none" (the framework has no recompute facility).
    recompute: str = "exact"

    @abstractmethod
    def make_model(self, weights: dict[str, np.ndarray], dropout: float = 0.0) -> Any: ...

    @abstractmethod
    def get_weights(self, model: Any) -> dict[str, np.ndarray]: ...

    def canonical_checkpoint(self, files: dict[str, bytes]) -> dict[str, bytes]:
        """A checkpoint's ``{relative path: bytes}`` with what differs between two saves of the same
        state for reasons of the framework's own (none here; oneflow's names) made equal."""
        return files

    @abstractmethod
    def make_sgd(self, model: Any, lr: float, momentum: float = 0.0) -> Any: ...

    @abstractmethod
    def make_adam(self, model: Any, lr: float, eps: float = 1e-8) -> Any:
        """The framework's Adam (an optimizer of another type than :meth:`make_sgd`'s)."""

    @abstractmethod
    def make_dataloader(self, x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool = False,
                        with_index: bool = False) -> Any:
        """A framework dataloader yielding ``{"x": ..., "y": ...}`` batches (plus ``"idx"``, the
        samples' dataset indices, when ``with_index``)."""

    @abstractmethod
    def loader_over(self, dataset: Any, batch_size: int, collate_fn: Any = None) -> Any:
        """The framework's own dataloader over ``dataset``, any object with ``__len__`` and
        ``__getitem__`` (samples as dicts of numpy arrays, a Hugging Face ``datasets.Dataset``),
        in order; ``collate_fn(samples)`` makes each batch when given (the framework's own otherwise)."""

    @abstractmethod
    def make_lr_scheduler(self, optimizer: Any) -> Any:
        """A step-decay LR scheduler (halve the LR every 2 steps) of the framework."""

    @abstractmethod
    def indices_of(self, batch: Any) -> list[int]:
        """The ``idx`` entry of a batch as python ints."""

    @abstractmethod
    def hand_train(self, model: Any, optimizer: Any, batches: list[tuple[np.ndarray, np.ndarray]],
                   loss_scale: float = 1.0, step_every: int = 1,
                   clip: Optional[tuple[str, float]] = None) -> None:
        """The hand-written training loop of the framework over ``batches``; ``clip`` =
        ``("norm" | "value", value)`` clips with the framework's own utility before each step."""

    @abstractmethod
    def grads_of(self, model: Any, optimizer: Any) -> dict[str, np.ndarray]:
        """The pending gradients of the model's weights as numpy, in the canonical layout
        (jittor keeps them in the optimizer, hence ``optimizer``)."""

    @abstractmethod
    def hand_clipped_grads(self, model: Any, optimizer: Any, x: np.ndarray, y: np.ndarray,
                           clip_type: Optional[str], value: float) -> dict[str, np.ndarray]:
        """Forward and backward of the loss on ``(x, y)`` by hand, then the framework's own
        clipping (``"norm"``, ``"value"``, or None for none); the resulting gradients."""

    @abstractmethod
    def predict(self, model: Any, x: np.ndarray) -> np.ndarray:
        """Logits for ``x`` in eval mode, as numpy."""

    def lr_of(self, optimizer: Any) -> float:
        """The optimizer's (first parameter group's) learning rate, read with the framework's own API."""
        raise NotImplementedError(f"{self.driver_name} harness does not read learning rates")

    def wrap_user_data_parallel(self, model: Any) -> Any:
        """Inside a launched rank: set up the framework's process group and wrap ``model`` (behind a
        forward that returns ``{"loss": ...}``) in the framework's own data-parallel class, as a user
        who does it themselves would. Backends without such a class do not override this."""
        raise NotImplementedError(f"{self.driver_name} has no user-side data-parallel wrapper")

    @abstractmethod
    def foreign_object(self) -> Any:
        """Something that is not a model of this framework (for the bad-input table)."""
