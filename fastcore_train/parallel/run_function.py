"""One rank of a function job: ``python -m fastcore_train.parallel.run_function JOB_FOLDER``.

Started by :mod:`fastcore_train.parallel.function_launch` with the rank's launcher variables set
(or by ``mpirun``): imports the backend, unpickles the function and its arguments, runs it, and
leaves rank 0's return value, or any rank's exception, in the job folder for the caller.
"""
from __future__ import annotations

import importlib
import os
import pickle
import sys
import traceback
from pathlib import Path

from fastcore_train.parallel.environment import LAUNCHED_RANK_ENV, MPIRUN
from fastcore_train.parallel.launch import _die_with_parent, redirect_own_output
from fastcore_train.parallel.rank_errors import PARENT_ENV, record_failure


def this_rank() -> int:
    """The rank the launcher gave this process (its own variable, or Open MPI's under mpirun)."""
    value = os.environ.get(LAUNCHED_RANK_ENV, "")
    if value.isdigit():
        return int(value)
    facts = MPIRUN.detect()
    return facts.rank if facts is not None else 0


def _fail(rank: int, exception: BaseException) -> None:
    if not record_failure(rank, exception):  # recorded: the caller raises it, with the others folded under it
        sys.stderr.write(f"[rank {rank}] failed:\n")
        traceback.print_exception(type(exception), exception, exception.__traceback__, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)  # at once: the other ranks may be waiting in a collective; the caller stops them


def die_with_the_caller() -> None:
    """A rank the caller started directly ends when the caller does (``PR_SET_PDEATHSIG``, asked
    here rather than between fork and exec, which is unsafe in a threaded notebook kernel)."""
    parent = os.environ.get(PARENT_ENV, "")
    if os.environ.get(LAUNCHED_RANK_ENV) == "mpi" or not parent.isdigit():
        return  # mpirun's ranks: mpirun ends them
    _die_with_parent()
    if os.getppid() != int(parent):  # the caller ended before the request took effect
        os._exit(1)


def main(folder: str) -> None:
    die_with_the_caller()
    rank = this_rank()
    try:
        with open(Path(folder, "payload.pkl"), "rb") as payload:
            header = pickle.load(payload)
            if os.environ.get(LAUNCHED_RANK_ENV) == "mpi":
                redirect_own_output(header["output_from_new_proc"], rank)
            if header["backend_module"]:
                importlib.import_module(header["backend_module"])
            function, args = pickle.load(payload)  # cloudpickle's output loads with pickle
        result = function(*args)
    except BaseException as exception:  # noqa: BLE001 - every failure goes to the caller
        _fail(rank, exception)
        return
    if rank == 0:
        try:
            import cloudpickle

            data = cloudpickle.dumps(result)
        except Exception as error:
            _fail(rank, TypeError(f"the function's return value could not be pickled back to the caller "
                                  f"({type(error).__name__}: {error}); return plain data"))
            return
        partial = Path(folder, "result.pkl.tmp")
        partial.write_bytes(data)
        partial.replace(Path(folder, "result.pkl"))


if __name__ == "__main__":
    main(sys.argv[1])
