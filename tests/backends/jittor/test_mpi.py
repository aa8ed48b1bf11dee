"""What only jittor's MPI data parallel has: it needs ``mpirun``. Everything else it shares with
the other backends' data parallel is tested in ``tests/distributed``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.distributed

JOB = Path(__file__).resolve().parents[2] / "distributed" / "jobs" / "train_job.py"


def test_missing_mpirun_is_a_clear_error(tmp_path):
    bin_dir = tmp_path / "bin"  # the PATH's programs, less MPI's
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        for program in Path(folder).glob("*") if Path(folder).is_dir() else ():
            if not program.name.startswith(("mpi", "orte", "ompi", "prte")) and not (bin_dir / program.name).exists():
                (bin_dir / program.name).symlink_to(program)
    config = {"backend": "jittor", "out": str(tmp_path), "device": ["cpu", "cpu"], "world_size": 2}
    completed = subprocess.run([sys.executable, str(JOB), json.dumps(config)], capture_output=True, text=True,
                               timeout=180, env={**os.environ, "PATH": str(bin_dir)})
    assert completed.returncode != 0
    assert "'mpirun' was not found" in completed.stderr and "openmpi-bin" in completed.stderr
