"""fastNLP 1.0's driver method names keep working, answered by the driver's parts."""
from __future__ import annotations

import warnings

import pytest

from fastcore_train.drivers import Driver
from fastcore_train.drivers.fastnlp_names import FASTNLP_NAMES
from tests.drivers.numpy_backend import NumpyDriver, SoftmaxRegression


@pytest.fixture
def driver():
    driver = NumpyDriver(SoftmaxRegression(4, 3))
    driver.setup()
    return driver


def test_old_names_reach_the_parts(driver):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert driver.get_local_rank() == driver.comm.local_rank == 0
        assert driver.barrier == driver.comm.barrier
        assert driver.tensor_to_numeric == driver.data.to_numeric
        assert driver.all_gather_object(3) == [3]
        assert driver.model_device == driver.device


def test_each_old_name_warns_once_with_the_new_name(driver):
    from fastcore_train.drivers import fastnlp_names

    fastnlp_names._warned.discard("is_global_zero")
    with pytest.warns(FutureWarning, match=r"driver\.comm\.is_global_zero"):
        assert driver.is_global_zero()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        driver.is_global_zero()


def test_old_names_are_not_driver_members_and_unknown_names_still_fail(driver):
    assert not set(FASTNLP_NAMES) & set(dir(Driver))
    with pytest.raises(AttributeError, match="no attribute 'tensor_to_numbers'"):
        driver.tensor_to_numbers
