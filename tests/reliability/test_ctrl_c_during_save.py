"""Ctrl-C pressed again while the exception checkpoint is being written (``CheckpointCallback(
on_exceptions=KeyboardInterrupt)``), with real SIGINTs to a real one-process job, on every backend.

The next Ctrl-C is deferred: the save completes and ``run()`` returns as after one Ctrl-C (before, the
second KeyboardInterrupt landed in the framework's writer: torch's "unexpected pos", no exception
checkpoint, exit code 1). The Ctrl-C after that abandons the save cleanly: no temporary is left, the
earlier checkpoints are intact, and a warning says the save was abandoned."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from tests.distributed.launchers import BACKENDS, job_environment
from tests.processes import default_sigint, files_matching, read_line, wait_until

JOB = Path(__file__).parent / "jobs" / "hang_job.py"
SLOW_SAVE = 3.0  # seconds the exception checkpoint's model file takes in a job whose save completes
#: ... and in the job whose save is abandoned: far longer than a job takes to end on a loaded machine
#: (3.96 s once, in CI's two lanes), so that ending before it shows the save was not waited for.
ABANDONED_SAVE = 60.0


def start(backend_name: str, tmp_path: Path, slow_save: float = SLOW_SAVE) -> subprocess.Popen:
    backend = BACKENDS[backend_name]
    config = {"backend": backend.name, "out": str(tmp_path), "device": "cpu", "world_size": 1, "n_epochs": 100000,
              "slow": True, "announce": True, "checkpoints": str(tmp_path / "checkpoints"), "every_n_batches": 2,
              "slow_exception_save": slow_save}
    job = subprocess.Popen(backend.command(JOB, config, "self", 1), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=job_environment(), preexec_fn=default_sigint)
    try:
        assert "TRAINING" in read_line(job.stdout, 120)
        wait_until(files_matching(tmp_path / "checkpoints", "*/epoch_*/meta.json"), 60, "a regular checkpoint")
    except BaseException:
        job.kill()
        raise
    return job


def finish(job: subprocess.Popen) -> str:
    try:
        _, stderr = job.communicate(timeout=90)
    finally:
        if job.poll() is None:
            job.kill()
    return stderr


def saved(tmp_path: Path, name: str) -> list[Path]:
    return list((tmp_path / "checkpoints").glob(f"*/{name}/meta.json"))


def temporaries(tmp_path: Path) -> list[Path]:
    return [path for path in (tmp_path / "checkpoints").rglob("*") if ".tmp-" in path.name]


def test_ctrl_c_twice_quickly_waits_for_the_exception_checkpoint(backend_name, tmp_path):
    job = start(backend_name, tmp_path)
    job.send_signal(signal.SIGINT)
    time.sleep(0.05)
    job.send_signal(signal.SIGINT)
    stderr = finish(job)
    assert job.returncode == 0, stderr[-3000:]  # run() returned as after one Ctrl-C, and the script went on
    assert "press Ctrl-C again to abandon it" in stderr, stderr[-3000:]
    assert len(saved(tmp_path, "exception_KeyboardInterrupt")) == 1, stderr[-3000:]
    assert json.loads((tmp_path / "rank_0.exception").read_text())["type"] == "KeyboardInterrupt"
    assert temporaries(tmp_path) == [] and "unexpected pos" not in stderr


def test_ctrl_c_again_during_the_save_abandons_it_cleanly(backend_name, tmp_path):
    job = start(backend_name, tmp_path, ABANDONED_SAVE)
    job.send_signal(signal.SIGINT)
    line = read_line(job.stdout, 60)
    assert "SAVING" in line, (line, finish(job)[-3000:])  # the exception checkpoint's write has begun
    earlier = sorted(path.parent.name for path in saved(tmp_path, "epoch_*"))
    assert earlier, "a regular checkpoint exists before the exception checkpoint"
    job.send_signal(signal.SIGINT)  # deferred
    time.sleep(0.05)
    job.send_signal(signal.SIGINT)  # abandons
    started = time.monotonic()
    stderr = finish(job)
    assert time.monotonic() - started < ABANDONED_SAVE, "the save was abandoned, not finished"
    assert job.returncode == 0, stderr[-3000:]
    assert "Abandoned the exception checkpoint" in stderr and "earlier checkpoints are intact" in stderr, stderr[-3000:]
    assert saved(tmp_path, "exception_KeyboardInterrupt") == [] and temporaries(tmp_path) == []
    for name in earlier:  # still complete
        meta = saved(tmp_path, name)[0]
        assert json.loads(meta.read_text())["checksums"], name
