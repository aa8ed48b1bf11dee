"""A small third-party backend built on numpy alone, registered by the tests through the public
registry: it proves that a backend outside this package can plug in, own its keyword arguments
and train end to end through ``Trainer(driver="mine", mine_kwargs=...)``.

Its "framework" is a softmax regression whose gradients are written by hand; its driver keeps
the model's weights as numpy arrays and saves them with ``np.savez``.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

import numpy as np

from fastcore_train.drivers import DataAdapter, Driver, Persistence

RECEIVED_KWARGS: list[dict[str, Any]] = []  # what create_driver was given, for the tests to inspect


class Loss:
    """A loss value with the gradients of the weights that produced it (our 'autograd')."""

    def __init__(self, value: float, grads: dict[str, np.ndarray]) -> None:
        self.value, self.grads = value, grads


class SoftmaxRegression:
    def __init__(self, n_in: int, n_out: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.params = {"w": rng.normal(0, 0.1, (n_in, n_out)), "b": np.zeros(n_out)}
        self.grads = {name: np.zeros_like(value) for name, value in self.params.items()}
        self.training = True

    def logits(self, x: np.ndarray) -> np.ndarray:
        return x @ self.params["w"] + self.params["b"]

    def train_step(self, x: np.ndarray, y: np.ndarray) -> dict[str, Loss]:
        logits = self.logits(x)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = shifted / shifted.sum(axis=1, keepdims=True)
        value = float(-np.log(probs[np.arange(len(y)), y]).mean())
        delta = probs.copy()
        delta[np.arange(len(y)), y] -= 1
        delta /= len(y)
        return {"loss": Loss(value, {"w": x.T @ delta, "b": delta.sum(axis=0)})}

    def evaluate_step(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"pred": self.logits(x)}


class SGD:
    def __init__(self, model: SoftmaxRegression, lr: float) -> None:
        self.model, self.lr = model, lr

    def step(self) -> None:
        for name, value in self.model.params.items():
            value -= self.lr * self.model.grads[name]

    def zero_grad(self) -> None:
        for grad in self.model.grads.values():
            grad[...] = 0


class NumpyData(DataAdapter):
    """Batches are numpy arrays already: nothing to move; losses read as their value."""

    def to_numeric(self, value: Any) -> Any:
        if isinstance(value, Loss):
            return value.value
        if isinstance(value, dict):
            return {key: self.to_numeric(item) for key, item in value.items()}
        return value.tolist() if isinstance(value, np.ndarray) else value


class NumpyPersistence(Persistence):
    """Weights with ``np.savez``, learning rates as JSON, no random state of its own."""

    model_file_suffix = ".npz"

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        with open(path, "wb") as handle:
            np.savez(handle, **self.driver.model.params)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        with np.load(path) as saved:
            for name in self.driver.model.params:
                self.driver.model.params[name][...] = saved[name]

    def save_training_state(self, path: Path) -> None:
        Path(path).write_text(json.dumps({"lr": [optimizer.lr for optimizer in self.driver.optimizers]}))

    def load_training_state(self, path: Path) -> None:
        for optimizer, lr in zip(self.driver.optimizers, json.loads(Path(path).read_text())["lr"]):
            optimizer.lr = lr

    def rng_state(self) -> Any:
        return None

    def load_rng_state(self, state: Any) -> None:
        pass


class NumpyDriver(Driver):
    """A single-process driver; ``grad_scale`` (from ``mine_kwargs``) multiplies every gradient."""

    backend = "mine"
    _optimizer_type = SGD
    _optimizer_name = "tests.drivers.numpy_backend.SGD"

    def __init__(self, model: SoftmaxRegression, grad_scale: float = 1.0, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.grad_scale = grad_scale
        self.data = NumpyData()
        self.io = NumpyPersistence(self)

    def setup(self) -> None:
        pass

    @property
    def device(self) -> str:
        return "cpu"

    def get_model_call_fn(self, fn_name: str, for_training: bool = True
                          ) -> tuple[Callable[..., Any], Optional[Callable[..., Any]]]:
        fn = getattr(self.model, fn_name)
        return fn, fn

    def set_model_mode(self, mode: str) -> None:
        self.model.training = mode == "train"

    def evaluate_context(self) -> ContextManager[Any]:
        return contextlib.nullcontext()

    def backward(self, loss: Loss) -> None:
        for name, grad in loss.grads.items():
            self.model.grads[name] += self.grad_scale * grad

    def step(self) -> None:
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad()


# ---------------------------------------------------------------------- the backend module contract
def is_model(model: Any) -> bool:
    return isinstance(model, SoftmaxRegression)


def seed_framework(seed: int) -> None:
    pass  # nothing random of its own: numpy's global generator is seeded by seed_everything


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False, **kwargs: Any) -> NumpyDriver:
    RECEIVED_KWARGS.append(dict(kwargs))
    mine = dict(kwargs.get("mine_kwargs") or {})
    return NumpyDriver(model, grad_scale=mine.pop("grad_scale", 1.0), fp16=fp16)


def build_demo(data: Any, hidden: int, lr: float, batch_size: int, seed: int) -> Any:
    raise NotImplementedError("the numpy test backend has no demo")
