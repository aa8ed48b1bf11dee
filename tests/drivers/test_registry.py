"""The driver registry and choose_driver's errors, without importing any framework."""
from __future__ import annotations

import pytest

from fastcore_train.drivers import Driver, available_driver_names, choose_driver
from fastcore_train.drivers.registry import backend_for_driver_name, framework_of


def test_torch_is_registered():
    assert "torch" in available_driver_names()
    assert backend_for_driver_name("torch").framework_module == "torch"


def test_unknown_driver_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"Unknown driver 'mxnet'. Available drivers: torch"):
        choose_driver(object(), "mxnet")


def test_auto_on_an_unknown_model_type_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"cannot tell which framework.*builtins.object.*name a driver: torch"):
        choose_driver(object(), "auto")


def test_framework_detection_reads_class_modules_only():
    class FakeBase:  # a class that merely claims to live in torch: detection must not import anything
        pass

    FakeBase.__module__ = "torch.nn.modules.module"

    class UserModel(FakeBase):
        pass

    assert framework_of(UserModel()) == "torch"
    assert framework_of(3.0) is None


def test_a_driver_instance_is_used_as_is():
    # a Driver subclass whose methods do nothing: only its identity matters here
    methods = {name: (lambda *args, **kwargs: None) for name in Driver.__abstractmethods__}
    instance = type("NoOpDriver", (Driver,), methods)(model=None)
    assert choose_driver(object(), instance) is instance


def test_driver_of_wrong_type():
    with pytest.raises(ValueError, match="driver must be a name"):
        choose_driver(object(), 42)
