"""Re-running ``python train.py`` under ``mpirun`` when a device list asks for several ranks.

Jittor's data parallelism is MPI: ``mpirun`` starts every rank, jittor reads its rank from MPI.
So a plain ``python train.py`` with ``device=["cpu", "cpu"]`` replaces itself (``os.execvpe``)
with ``mpirun -np 2 <the same command line>``: the process id, the terminal's Ctrl-C and the exit
code stay those of the command the user ran, and mpirun ends the whole job when a rank fails.
"""
from __future__ import annotations

import os
import shutil
import sys

from fastcore_train.launch import LAUNCHED_RANK_ENV, command_line

MPI_INSTALL_HINT = ("install an MPI implementation first, e.g. on Debian/Ubuntu: apt-get install -y openmpi-bin "
                    "libopenmpi-dev (jittor then compiles its MPI operators on first use)")


def mpirun_command(world_size: int) -> list[str]:
    """``mpirun -np N`` and this process's command line; a clear error when mpirun is missing."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise RuntimeError(f"device lists {world_size} devices, which jittor runs as {world_size} MPI ranks, but "
                           f"'mpirun' was not found on PATH: {MPI_INSTALL_HINT}; or pass one device.")
    return [mpirun, "-np", str(world_size), *command_line()]


def mpirun_environment(world_size: int) -> dict[str, str]:
    """This environment plus what Open MPI needs to run ranks as root and beyond the core count,
    and a share of the cores per rank for OpenMP."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world_size)))
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env[LAUNCHED_RANK_ENV] = "mpi"
    return env


def exec_under_mpirun(world_size: int) -> None:
    """Replace this process with ``mpirun -np world_size`` running the same command line; never returns."""
    command = mpirun_command(world_size)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(command[0], command, mpirun_environment(world_size))
