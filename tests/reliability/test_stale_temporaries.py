"""Temporaries of a write killed mid-way are removed by the next write in that folder, and
nothing else is: only names our writer makes, from this host, whose process is gone."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from fastcore_train.utils.atomic import _host_id, atomic_path

KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from fastcore_train.utils.atomic import atomic_path
    with atomic_path(sys.argv[1]) as staging:
        staging.mkdir()
        (staging / "half.bin").write_bytes(b"x" * 1000)
        print(staging, flush=True)
        time.sleep(600)
""")


def killed_mid_write(target):
    """Start a real writer, SIGKILL it while its temporary folder is half written."""
    process = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    staging = process.stdout.readline().strip()
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return staging


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    staging = killed_mid_write(tmp_path / "ckpt")
    assert os.path.isdir(staging) and os.path.basename(staging).startswith(".ckpt.tmp-")
    with atomic_path(tmp_path / "other") as new:
        new.write_text("done")
    assert not os.path.exists(staging)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]


def test_what_is_not_a_dead_writers_temporary_is_kept(tmp_path):
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        live_writer = tmp_path / f".ckpt.tmp-{_host_id()}-{alive.pid}-0123abcd"
        other_host = tmp_path / ".ckpt.tmp-ffffffff-999999999-0123abcd"
        look_alike = [tmp_path / ".ckpt.tmp-mine", tmp_path / "ckpt.tmp-1-2", tmp_path / ".cache"]
        for path in (live_writer, other_host, *look_alike):
            path.mkdir()
            (path / "keep.txt").write_text("keep")
        with atomic_path(tmp_path / "ckpt") as new:
            new.mkdir()
        for path in (live_writer, other_host, *look_alike):
            assert (path / "keep.txt").read_text() == "keep", path
    finally:
        alive.kill()
        alive.wait()
