"""The Driver contract and the registry that maps driver names and model types to backends."""
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.registry import (BackendEntry, available_driver_names, register_backend)
from fastcore_train.drivers.choose import choose_driver

__all__ = ["Driver", "BackendEntry", "available_driver_names", "register_backend", "choose_driver"]
