"""Only its own ranks can reach a job on one machine (issue 39): every socket a 2-rank job listens on is
bound to loopback, on every backend and every way of starting it, except the ones a framework gives no
way to narrow (``OPEN_BY_FRAMEWORK``, with the evidence in docs/security.md), which must stay exactly those.

Self-launched (``device=["cpu", "cpu"]``) and ``fastcore_train.launch`` (``notebook_launcher``) jobs are
started here and watched from their first process to their end (``tests/distributed/listening.py``
lists the sockets of the process tree every 50 ms, rendezvous included); the framework's own launcher is
the rank pool's (torchrun, paddle's launcher, mpirun, oneflow's launcher), looked at as it is.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.distributed.launchers import BACKENDS, job_environment
from tests.distributed.listening import Listening, SocketWatch, describe, listening_sockets, process_tree
from tests.processes import wait_until

pytestmark = pytest.mark.distributed

JOBS = Path(__file__).parent / "jobs"
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class OpenByFramework:
    """Sockets a framework opens on every interface with no setting to narrow them: which, and how many."""

    what: str
    matches: Callable[[Listening, int], bool]  # (socket, pid of the job's first process)
    at_most: int


def _mpirun(listening: Listening, root: int) -> bool:
    return listening.command in ("prterun", "mpirun", "orterun")


def _rank(listening: Listening, root: int) -> bool:
    return listening.command.startswith("python")


#: Per backend and way of starting: what stays open (docs/security.md, "What cannot be narrowed").
OPEN_BY_FRAMEWORK = {
    ("torch", "launcher"): OpenByFramework("torchrun's agent: its rendezvous and worker TCP stores (torch's "
                                           "TCPStore server binds the wildcard address; torchrun has no bind option)",
                                           lambda listening, root: listening.pid == root, 2),
    **{("paddle", way): OpenByFramework("rank 0's TCP store (paddle binds it to 0.0.0.0, whatever PADDLE_MASTER says)",
                                        lambda listening, root: _rank(listening, root) and listening.address == "0.0.0.0", 1)
       for way in ("self", "launch", "launcher")},
    **{("jittor", way): OpenByFramework("mpirun's out-of-band channel (PRRTE's oob tcp binds 0.0.0.0 and [::]; "
                                        "oob_tcp_if_include=lo aborts mpirun)", _mpirun, 2)
       for way in ("self", "launch", "launcher")},
    **{("oneflow", way): OpenByFramework("each rank's control and data ports (oneflow 0.9 binds them to every "
                                         "interface and has no setting for the address: rank 0 its bootstrap, control and data ports, "
                                         "the others control and data)", _rank, 5)
       for way in ("self", "launch", "launcher")},
}


def check_only_loopback(backend: str, way: str, sockets: set[Listening], root: int) -> None:
    """Fail unless every non-loopback socket is one ``OPEN_BY_FRAMEWORK`` names for ``backend``/``way``."""
    open_ = {listening for listening in sockets if not listening.loopback}
    known = OPEN_BY_FRAMEWORK.get((backend, way))
    allowed = {listening for listening in open_ if known is not None and known.matches(listening, root)}
    unexpected = open_ - allowed
    assert not unexpected, (f"{backend} ({way}) listens beyond loopback:\n{describe(unexpected)}\n"
                            f"all its listening sockets:\n{describe(sockets)}")
    if known is not None:
        ports = {(listening.address, listening.port) for listening in allowed}
        assert len(ports) <= known.at_most, (f"{backend} ({way}): more sockets open than {known.what} "
                                             f"({known.at_most}):\n{describe(allowed)}")


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
    check_only_loopback(backend_name, way, seen, job.pid)


def pid_of_rank() -> int:
    return os.getpid()


def test_a_job_under_the_frameworks_launcher_listens_on_loopback_only(backend_name, rank_pool):
    rank_pool.run(pid_of_rank)  # started, warmed up: the process group every later job uses is there
    root = rank_pool.process.pid
    sockets = listening_sockets(process_tree(root))
    assert sockets, "no listening socket found in the rank pool's ranks: the listening does not see the job"
    check_only_loopback(backend_name, "launcher", sockets, root)
