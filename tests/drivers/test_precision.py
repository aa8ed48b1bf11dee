"""The framework-free precision layer: loss scaling, stepping through a scaler, unscaling once per
step before clipping, the scaler's checkpoint state, and the Driver methods that delegate to it.

Fakes stand in for a framework's scaler, optimizers and losses, so no framework is needed.
"""
from __future__ import annotations

import contextlib
from typing import Any, Optional

import pytest

from fastcore_train.drivers import Driver
from fastcore_train.drivers.persistence import Persistence
from fastcore_train.drivers import precision as precision_module
from fastcore_train.drivers.precision import GRAD_SCALER_KEY, Precision


class Loss:
    def __init__(self, calls: list, name: str = "loss") -> None:
        self.calls, self.name = calls, name

    def backward(self) -> None:
        self.calls.append(("backward", self.name))


class Optimizer:
    def __init__(self, calls: list, name: str) -> None:
        self.calls, self.name = calls, name

    def step(self) -> None:
        self.calls.append(("step", self.name))


class Scaler:
    """Records what a torch-style grad scaler is asked to do."""

    def __init__(self, calls: list, scale: float = 8.0) -> None:
        self.calls, self.scale_value = calls, scale

    def scale(self, loss: Loss) -> Loss:
        self.calls.append(("scale", loss.name))
        return Loss(self.calls, f"scaled {loss.name}")

    def step(self, optimizer: Optimizer) -> None:
        self.calls.append(("scaler.step", optimizer.name))

    def update(self) -> None:
        self.calls.append(("update",))

    def unscale_(self, optimizer: Optimizer) -> None:
        self.calls.append(("unscale_", optimizer.name))

    def state_dict(self) -> dict:
        return {"scale": self.scale_value}

    def load_state_dict(self, state: dict) -> None:
        self.scale_value = state["scale"]


class ClipUtilities:
    """Stands in for ``torch.nn.utils`` (and paddle's, oneflow's)."""

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def clip_grad_norm_(self, parameters: Any, max_norm: float, norm_type: float) -> str:
        self.calls.append(("clip_grad_norm_", list(parameters), max_norm, norm_type))
        return "norm"

    def clip_grad_value_(self, parameters: Any, value: float) -> None:
        self.calls.append(("clip_grad_value_", list(parameters), value))


class FakePrecision(Precision):
    """A backend's precision as the base sees it: its autocast, devices, scaler and clip utilities."""

    unavailable_warning = "fp16=True does nothing on this fake device."

    def __init__(self, calls: list, fp16: bool = True, on_device: bool = True, **kwargs: Any) -> None:
        super().__init__(fp16, **kwargs)
        self.calls, self.on_device = calls, on_device

    def available(self) -> bool:
        return self.on_device

    def new_scaler(self) -> Scaler:
        return Scaler(self.calls, **self.gradscaler_kwargs)

    @contextlib.contextmanager
    def autocast(self) -> Any:
        self.calls.append(("autocast",))
        yield

    def clip_utilities(self) -> ClipUtilities:
        return ClipUtilities(self.calls)


@pytest.fixture
def warnings_logged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The messages the precision layer logs as warnings during the test."""
    messages: list[str] = []
    monkeypatch.setattr(precision_module.logger, "warning", messages.append)
    return messages


def scaled(calls: list) -> FakePrecision:
    precision = FakePrecision(calls)
    precision.setup()
    return precision


def test_full_precision_runs_the_loss_and_optimizers_as_they_are():
    calls: list = []
    precision = Precision()
    precision.setup()
    with precision.forward_context():
        pass
    precision.backward(Loss(calls))
    precision.step([Optimizer(calls, "a"), Optimizer(calls, "b")])
    assert calls == [("backward", "loss"), ("step", "a"), ("step", "b")]
    assert precision.scaler is None and precision.state_dict() is None
    precision.load_state_dict({"scale": 2.0})  # nothing to restore it into
    precision.unscale_gradients([Optimizer(calls, "a")])  # nothing to unscale
    assert len(calls) == 3


def test_full_precision_has_no_clipping_utilities():
    with pytest.raises(NotImplementedError, match="cannot clip gradients by norm"):
        Precision().clip_grad_norm([], 1.0, 2.0, [])
    with pytest.raises(NotImplementedError, match="cannot clip gradients by value"):
        Precision().clip_grad_value([], 1.0, [])


def test_fp16_builds_the_scaler_at_setup_and_autocasts_the_forward():
    calls: list = []
    precision = FakePrecision(calls, gradscaler_kwargs={"scale": 4.0})
    assert precision.scaler is None
    precision.setup()
    assert isinstance(precision.scaler, Scaler) and precision.scaler.scale_value == 4.0
    with precision.forward_context():
        pass
    assert calls == [("autocast",)]


def test_fp16_where_it_cannot_run_warns_and_stays_full_precision(warnings_logged):
    calls: list = []
    precision = FakePrecision(calls, on_device=False)
    precision.setup()
    assert warnings_logged == ["fp16=True does nothing on this fake device."]
    assert precision.scaler is None
    with precision.forward_context():
        pass
    assert calls == []


def test_no_fp16_no_scaler_no_autocast_no_warning(warnings_logged):
    calls: list = []
    precision = FakePrecision(calls, fp16=False, on_device=False)
    precision.setup()
    with precision.forward_context():
        pass
    assert precision.scaler is None and calls == [] and warnings_logged == []


def test_backward_scales_the_loss_and_step_goes_through_the_scaler():
    calls: list = []
    precision = scaled(calls)
    precision.backward(Loss(calls))
    precision.step([Optimizer(calls, "a"), Optimizer(calls, "b")])
    assert calls == [("scale", "loss"), ("backward", "scaled loss"), ("scaler.step", "a"), ("scaler.step", "b"),
                     ("update",)]


def test_clipping_unscales_once_per_step_before_clipping():
    calls: list = []
    precision = scaled(calls)
    optimizers = [Optimizer(calls, "a"), Optimizer(calls, "b")]
    assert precision.clip_grad_norm(iter(["p"]), 0.5, 2.0, optimizers) == "norm"
    precision.clip_grad_value(iter(["p"]), 0.1, optimizers)
    precision.step(optimizers)
    precision.clip_grad_value(iter(["p"]), 0.1, optimizers)  # the next step's gradients are scaled again
    assert calls == [("unscale_", "a"), ("unscale_", "b"), ("clip_grad_norm_", ["p"], 0.5, 2.0),
                     ("clip_grad_value_", ["p"], 0.1),
                     ("scaler.step", "a"), ("scaler.step", "b"), ("update",),
                     ("unscale_", "a"), ("unscale_", "b"), ("clip_grad_value_", ["p"], 0.1)]


def test_a_scaler_without_unscale_cannot_clip():
    class GraphOnlyScaler:  # scales, but cannot unscale eager gradients
        pass

    precision = Precision()
    precision.scaler = GraphOnlyScaler()
    with pytest.raises(NotImplementedError, match=r"GraphOnlyScaler has no unscale_\(\).*fp16=False"):
        precision.unscale_gradients([Optimizer([], "a")])


def test_scaler_state_round_trips_and_none_restores_nothing():
    saved = scaled([])
    saved.scaler.scale_value = 1024.0
    state = saved.state_dict()
    assert state == {"scale": 1024.0}
    restored = scaled([])
    restored.load_state_dict(state)
    assert restored.scaler.scale_value == 1024.0
    restored.load_state_dict(None)  # a checkpoint written without a scaler
    assert restored.scaler.scale_value == 1024.0
    assert GRAD_SCALER_KEY == "grad_scaler"  # the key checkpoints were written with


class Model:
    def parameters(self) -> Any:
        return iter(["w", "b"])


def _bare(base: type, **methods: Any) -> type:
    """A subclass of ``base`` whose abstract methods do nothing (and ``methods``)."""
    nothing: dict[str, Any] = {name: (lambda self, *args, **kwargs: None) for name in base.__abstractmethods__}
    return type(f"Bare{base.__name__}", (base,), {**nothing, **methods})


def _driver(precision: Optional[Precision] = None, stepping: Optional[list] = None) -> Driver:
    """A Driver whose abstract methods do nothing, holding ``precision`` (its default if None)."""
    driver = _bare(Driver, **({"_stepping_optimizers": lambda self: stepping} if stepping is not None else {}))(Model())
    driver.io = _bare(Persistence)(driver)
    if precision is not None:
        driver.precision = precision
    return driver


def test_the_driver_delegates_to_its_precision():
    calls: list = []
    precision = scaled(calls)
    driver = _driver(precision)
    driver.optimizers = [Optimizer(calls, "a")]
    assert driver.precision.scaler is precision.scaler
    with driver.precision.forward_context():
        driver.backward(Loss(calls))
    assert driver.clip_grad_norm(0.5) == "norm"
    driver.clip_grad_value(0.1)
    driver.step()
    assert calls == [("autocast",), ("scale", "loss"), ("backward", "scaled loss"), ("unscale_", "a"),
                     ("clip_grad_norm_", ["w", "b"], 0.5, 2.0), ("clip_grad_value_", ["w", "b"], 0.1),
                     ("scaler.step", "a"), ("update",)]
    driver.precision.scaler = None
    assert precision.scaler is None


def test_the_driver_steps_and_unscales_its_stepping_optimizers():
    calls: list = []
    wrapped = [Optimizer(calls, "wrapped")]
    driver = _driver(scaled(calls), stepping=wrapped)
    driver.optimizers = [Optimizer(calls, "user's")]
    driver.clip_grad_value(0.1)
    driver.step()
    assert calls == [("unscale_", "wrapped"), ("clip_grad_value_", ["w", "b"], 0.1), ("scaler.step", "wrapped"),
                     ("update",)]


def test_a_driver_is_full_precision_by_default():
    driver = _driver()
    assert type(driver.precision) is Precision and driver.precision.scaler is None and not driver.precision.fp16
    with pytest.raises(NotImplementedError, match="cannot clip gradients by norm"):
        driver.clip_grad_norm(1.0)


class StatefulOptimizer(Optimizer):
    def __init__(self, calls: list, name: str) -> None:
        super().__init__(calls, name)
        self.state = {"lr": 0.1}

    def state_dict(self) -> dict:
        return dict(self.state)

    def load_state_dict(self, state: dict) -> None:
        self.state = dict(state)


def test_training_state_keeps_the_optimizers_and_the_scaler_state_under_their_keys():
    driver = _driver(scaled([]))
    driver.precision.scaler.scale_value = 512.0
    driver.optimizers = [StatefulOptimizer([], "a")]
    state = driver.io.training_state([optimizer.state_dict() for optimizer in driver.optimizers])
    assert state == {"optimizers": [{"lr": 0.1}], "grad_scaler": {"scale": 512.0}}
    assert _driver().io.training_state([]) == {"optimizers": [], "grad_scaler": None}

    restored = _driver(scaled([]))
    restored.optimizers = [StatefulOptimizer([], "a")]
    restored.optimizers[0].state = {"lr": 0.5}
    restored.io.restore_training_state(state)
    assert restored.optimizers[0].state == {"lr": 0.1} and restored.precision.scaler.scale_value == 512.0


def test_restoring_uses_the_given_optimizer_loader_and_checks_the_count():
    loaded: list = []
    driver = _driver()
    driver.optimizers = [StatefulOptimizer([], "a")]
    driver.io.restore_training_state({"optimizers": [{"lr": 1.0}]}, lambda optimizer, saved: loaded.append(saved))
    assert loaded == [{"lr": 1.0}]  # and no scaler state, as jittor's files have none
    with pytest.raises(ValueError, match=r"holds 2 optimizer state\(s\) but the trainer has 1 optimizer\(s\)"):
        driver.io.restore_training_state({"optimizers": [{}, {}], "grad_scaler": None})
