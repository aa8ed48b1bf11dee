"""Only its own ranks can reach a job on one machine (issue 39): every socket a 2-rank job listens on is
bound to loopback, on every backend and every way of starting it, except the ones a framework gives no
way to narrow (``OPEN_BY_FRAMEWORK`` in tests/distributed/open_sockets.py, with the evidence in
docs/security.md), which must stay exactly those.

Self-launched (``device=["cpu", "cpu"]``) and ``fastcore_train.launch`` (``notebook_launcher``) jobs are
started here and watched from their first process to their end (``tests/distributed/listening.py``
lists the sockets of the process tree every 50 ms, rendezvous included); the framework's own launcher is
the rank pool's (torchrun, paddle's launcher, mpirun, oneflow's launcher), looked at as it is.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.distributed.launchers import BACKENDS, job_environment
from tests.distributed.listening import SocketWatch, listening_sockets, process_tree
from tests.distributed.open_sockets import check_one_machine
from tests.processes import wait_until

pytestmark = pytest.mark.distributed

JOBS = Path(__file__).parent / "jobs"
ROOT = Path(__file__).resolve().parents[2]


def start_held_job(backend_name: str, way: str, out: Path, **extra) -> subprocess.Popen:
    """A 2-rank train_job that holds after batch 2 until ``out/release`` exists (``way``: "self", "launch", or
    "launcher": the framework's own); ``extra``: more of train_job's config (``n_epochs``, ``slow``)."""
    backend = BACKENDS[backend_name]
    config = {"backend": backend_name, "out": str(out), "world_size": 2, "hold": True,
              "device": ["cpu", "cpu"] if way == "self" else None, **extra}
    script = JOBS / ("launch_job.py" if way == "launch" else "train_job.py")
    command = backend.launch([str(script), json.dumps(config)], backend.launcher if way == "launcher" else "self", 2, out)
    env = {**job_environment(), "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env, cwd=out)


def finish(job: subprocess.Popen, out: Path, timeout: float = 120) -> str:
    """Let a held job go on and wait for its end; its output (the job killed, and the test failed, on timeout)."""
    (out / "release").write_text("")
    try:
        output, _ = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, 9)
        output, _ = job.communicate()
        pytest.fail(f"the job did not end within {timeout} s after its release:\n{output[-3000:]}")
    return output


@pytest.mark.parametrize("way", ["self", "launch"])
def test_a_job_started_here_listens_on_loopback_only(backend_name, way, tmp_path):
    job = start_held_job(backend_name, way, tmp_path)
    watch = SocketWatch(job.pid).start()
    try:
        wait_until(lambda: (tmp_path / "training").exists() or job.poll() is not None, 240, "training")
        during_training = watch.now()
    finally:
        output = finish(job, tmp_path)
        seen = watch.stop()
    assert job.returncode == 0, output[-3000:]
    assert during_training, "no listening socket found while the job trained: the listing does not see the job"
    check_one_machine(backend_name, way, seen, job.pid)


def pid_of_rank() -> int:
    return os.getpid()


def test_a_job_under_the_frameworks_launcher_listens_on_loopback_only(backend_name, rank_pool):
    rank_pool.run(pid_of_rank)  # started, warmed up: the process group every later job uses is there
    root = rank_pool.process.pid
    sockets = listening_sockets(process_tree(root))
    assert sockets, "no listening socket found in the rank pool's ranks: the listening does not see the job"
    check_one_machine(backend_name, "launcher", sockets, root)
