"""The Driver contract, its layers, and the registry that maps driver names and model types to backends."""
from fastcore_train.drivers.collectives import Collectives
from fastcore_train.drivers.data import DataAdapter
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.persistence import Persistence
from fastcore_train.drivers.precision import Precision
from fastcore_train.drivers.registry import (BackendEntry, available_driver_names, register_backend)
from fastcore_train.drivers.choose import choose_driver

__all__ = ["Driver", "Collectives", "DataAdapter", "Persistence", "Precision", "BackendEntry",
           "available_driver_names", "register_backend", "choose_driver"]
