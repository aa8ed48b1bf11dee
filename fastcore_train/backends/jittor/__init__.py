"""The Jittor backend: its drivers, and the model-type check used by ``choose_driver``."""
from __future__ import annotations

import signal
import threading
from typing import Any

import jittor as jt

from fastcore_train.backends.jittor.demo import build_demo
from fastcore_train.backends.jittor.devices import DEVICES
from fastcore_train.backends.jittor.parallel_driver import JittorMPIDriver
from fastcore_train.backends.jittor.single_driver import JittorSingleDriver
from fastcore_train.backends.jittor.world import world_from_environment
from fastcore_train.parallel.launcher import choose_launcher
from fastcore_train.parallel.placement import place_ranks


__all__ = ["JittorSingleDriver", "JittorMPIDriver", "create_driver", "is_model", "seed_framework", "build_demo"]


def restore_python_signal_handling() -> None:
    """Undo the signal handlers ``import jittor`` installs process-wide: give SIGCHLD and SIGINT
    back to Python (only possible from the main thread; else a no-op).

    Jittor's C++ core handles SIGCHLD by ending the whole process (``quick_exit(1)``) whenever any
    child process dies of a signal other than SIGTERM (meant to report its dataset workers running
    out of memory), and SIGINT likewise, without a ``KeyboardInterrupt``. A training process that
    starts and stops other programs, or that a user interrupts, must keep Python's behaviour.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if hasattr(signal, "SIGCHLD"):
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


restore_python_signal_handling()  # importing jittor made any killed child process end this one


def is_model(model: Any) -> bool:
    return isinstance(model, jt.Module)


def seed_framework(seed: int) -> None:
    """Seed jittor's generator; under MPI each rank gets ``seed + rank * 2591`` (jittor's convention)."""
    jt.sync_all()  # pending random ops draw before the reseed, not after
    if jt.in_mpi:
        seed += int(jt.rank) * 2591
    jt.set_seed(seed % 0x7FFFFFFF)


def create_driver(driver_name: str, model: Any, device: Any = "cpu", fp16: bool = False,
                  **kwargs: Any) -> JittorSingleDriver:
    """One process for one device; MPI data parallel under mpirun, or for a device list (which
    re-runs the script under mpirun)."""
    placement = place_ranks(device, world_from_environment(), DEVICES)
    if placement.is_distributed:
        launch_world_size = placement.facts.world_size if placement.launch else None
        driver = JittorMPIDriver(model, device=placement.device, fp16=fp16, launch_world_size=launch_world_size,
                                 **kwargs)
        driver.launcher = choose_launcher(placement, "mpirun", None, driver.output_from_new_proc)
        return driver
    kwargs.pop("output_from_new_proc", None)
    return JittorSingleDriver(model, device=placement.device, fp16=fp16, **kwargs)
