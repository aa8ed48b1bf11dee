"""``notebook_launcher``: run a training function on the ranks of a local data-parallel job.

The notebook way to data parallel (Accelerate's argument names and meaning): instead of
re-running a script, the ranks run ``function(*args)``, each in a fresh interpreter with its
launcher's variables set, so the Trainer code written for torchrun works unchanged inside
(``device=None``). The caller only starts and watches them (see
:mod:`fastcore_train.parallel.function_launch`): a Jupyter kernel keeps running whatever a rank
does. ``launch`` is the same function for scripts and tests.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Sequence

from fastcore_train.drivers.registry import (BackendEntry, all_backends, backend_for_driver_name,
                                             find_backend_part)
from fastcore_train.parallel.function_launch import run_on_ranks, run_under_mpirun
from fastcore_train.parallel.rank_errors import RankFailedError

__all__ = ["notebook_launcher", "launch", "RankFailedError"]

#: The keyword options notebook_launcher takes beyond Accelerate's four arguments.
OPTIONS = ("output_from_new_proc",)


def _backend(driver: Optional[str]) -> BackendEntry:
    """The backend named by ``driver``, or the one whose framework this process has imported."""
    if driver is not None and driver != "auto":
        return backend_for_driver_name(driver)
    loaded = [entry for entry in all_backends() if entry.framework_module in sys.modules]
    if len(loaded) == 1:
        return loaded[0]
    names = ", ".join(repr(entry.name) for entry in (loaded or all_backends()))
    found = "several frameworks are imported" if loaded else "no framework is imported yet"
    raise ValueError(f"notebook_launcher cannot tell which framework to launch: {found}; pass driver= one of {names}.")


def notebook_launcher(function: Callable[..., Any], args: Sequence[Any] = (), num_processes: Optional[int] = None,
                      driver: Optional[str] = None, **options: Any) -> Any:
    """Run ``function(*args)`` on ``num_processes`` ranks of a local data-parallel job and return
    rank 0's return value once every rank has finished.

    ``num_processes=None``: one rank per visible GPU; with one GPU or none (and with 1), the
    function runs here, in this process. ``driver``: the backend ("torch", "paddle", "jittor",
    "oneflow", or one of their driver names); None: the one framework this process has imported.
    ``output_from_new_proc`` (option): the other ranks' output, as for the Trainer
    (``"only_error"`` by default; rank 0's output always shows here).

    Every rank is a new interpreter (functions and arguments defined in a notebook travel by
    cloudpickle); jittor's run under ``mpirun``. A failure on any rank stops the others and is
    raised here as :class:`RankFailedError`, naming the rank, with the first error's message.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"notebook_launcher got unknown option(s) {', '.join(unknown)}; it takes {', '.join(OPTIONS)}.")
    if not callable(function):
        raise TypeError(f"notebook_launcher runs a function; got {type(function).__name__}.")
    entry = _backend(driver)
    part = find_backend_part(entry, "function_launch")
    if part is None:
        raise ValueError(f"The {entry.name!r} backend cannot start ranks from a function (it has no "
                         "function_launch module); run a script with its launcher instead.")
    if num_processes is None:
        num_processes = max(1, part.gpu_count())
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"num_processes must be a positive number of ranks, got {num_processes!r}.")
    if num_processes == 1:
        return function(*args)
    output = options.get("output_from_new_proc", "only_error")
    variables = part.rank_variables(num_processes)
    if variables is None:
        return run_under_mpirun(function, args, num_processes, entry.module, output)
    return run_on_ranks(function, args, variables, entry.module, output, rendezvous=entry.import_rendezvous(variables))


#: The same launcher, for scripts and tests that want ranks without re-running ``sys.argv``.
launch = notebook_launcher
