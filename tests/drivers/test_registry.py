"""The driver registry and choose_driver's errors, without importing any framework."""
from __future__ import annotations

import pytest

from fastcore_train.drivers import Driver, available_driver_names, choose_driver
from fastcore_train.drivers.registry import backend_for_driver_name, framework_of, get_backend


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


def test_the_ranks_of_a_backend_that_meets_at_import_wait_for_rank_0s_address():
    """oneflow's ranks meet inside ``import oneflow`` at its launcher's master address: the ranks we
    start together are told that address (they start once rank 0 listens); others meet later."""
    from fastcore_train.parallel.environment import ONEFLOW_LAUNCH, TORCHRUN

    oneflow, torch = get_backend("oneflow"), get_backend("torch")
    assert oneflow.ranks_meet_at_import and not torch.ranks_meet_at_import
    variables = [ONEFLOW_LAUNCH.variables_for(rank, 2, "10.0.0.5", 29611) for rank in range(2)]
    assert oneflow.import_rendezvous(variables) == "10.0.0.5:29611"
    assert oneflow.import_rendezvous([]) is None
    assert torch.import_rendezvous([TORCHRUN.variables_for(rank, 2, "10.0.0.5", 29611) for rank in range(2)]) is None
