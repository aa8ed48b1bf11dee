"""What only jittor's MPI data parallel has: it needs ``mpirun``. Everything else it shares with
the other backends' data parallel is tested in ``tests/distributed``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[3]
JOB = ROOT / "tests" / "distributed" / "jobs" / "train_job.py"


def interpreter_without_mpi(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """An interpreter with no ``mpirun`` beside it (a new venv seeing this env's packages through
    PYTHONPATH), and an environment whose PATH has every program but MPI's."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        for program in Path(folder).glob("*") if Path(folder).is_dir() else ():
            if not program.name.startswith(("mpi", "orte", "ompi", "prte")) and not (bin_dir / program.name).exists():
                (bin_dir / program.name).symlink_to(program)
    packages = [sysconfig.get_paths()["purelib"], str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PATH": str(bin_dir), "PYTHONPATH": os.pathsep.join(filter(None, packages))}
    return str(venv / "bin" / "python"), env


def test_missing_mpirun_is_one_line_saying_how_to_get_it(tmp_path):
    python, env = interpreter_without_mpi(tmp_path)
    config = {"backend": "jittor", "out": str(tmp_path), "device": ["cpu", "cpu"], "world_size": 2}
    completed = subprocess.run([python, str(JOB), json.dumps(config)], capture_output=True, text=True,
                               timeout=300, env=env)
    assert completed.returncode != 0
    said = [line for line in completed.stderr.splitlines() if "'mpirun' was not found" in line]
    assert len(said) == 1 and 'pip install "fastcore-train[jittor]"' in said[0] and "openmpi-bin" in said[0], \
        completed.stderr[-3000:]
