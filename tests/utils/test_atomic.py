"""Atomic writes: a failure mid-write leaves the previous file or folder as it was."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fastcore_train.utils.atomic import TargetBusyError, _host_id, atomic_path, recover_folder, target_busy


def test_file_is_replaced_only_on_success(tmp_path):
    target = tmp_path / "model.bin"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as staging:
            staging.write_text("half")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"]
    with atomic_path(target) as staging:
        staging.write_text("new")
    assert target.read_text() == "new"


def test_folder_is_replaced_whole(tmp_path):
    target = tmp_path / "ckpt"
    for version in ("one", "two"):
        with atomic_path(target) as staging:
            staging.mkdir()
            (staging / "a.txt").write_text(version)
            if version == "one":
                (staging / "only-in-one.txt").write_text("x")
    assert sorted(p.name for p in target.iterdir()) == ["a.txt"]
    assert (target / "a.txt").read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_a_file_and_a_folder_replace_each_other(tmp_path):
    """A model saved as one file may be saved next as a folder (e.g. a paddle.jit.save export), and back."""
    target = tmp_path / "model.pdparams"
    target.write_text("state dict")
    with atomic_path(target) as staging:
        staging.mkdir()
        (staging / "model.json").write_text("export")
    assert (target / "model.json").read_text() == "export"
    with atomic_path(target) as staging:
        staging.write_text("state dict again")
    assert target.read_text() == "state dict again"
    assert [p.name for p in tmp_path.iterdir()] == ["model.pdparams"]


def dead_pid() -> int:
    """The pid of a process that has ended (a real one, waited for)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_recover_folder_restores_a_dead_writers_moved_aside_version(tmp_path):
    aside = tmp_path / f".ckpt.old-{_host_id()}-{dead_pid()}-1234abcd"
    aside.mkdir()
    (aside / "a.txt").write_text("previous")
    told: list[str] = []
    restored = recover_folder(tmp_path / "ckpt", notify=told.append)
    assert (restored / "a.txt").read_text() == "previous"
    assert not aside.exists()
    assert len(told) == 1 and aside.name in told[0] and "put back" in told[0]


def test_recover_folder_leaves_names_it_did_not_make(tmp_path):
    """A user's backups beside a missing folder are never taken for our leftovers."""
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        names = ["ckpt.old-20241126", "ckpt.old-1234abcd", "ckpt.old-v1", f".ckpt.old-ffffffff-{dead_pid()}-1234abcd",
                 f".ckpt.old-{_host_id()}-{alive.pid}-1234abcd"]  # the last two: another host, a live writer
        for name in names:
            (tmp_path / name).mkdir()
        told: list[str] = []
        assert not recover_folder(tmp_path / "ckpt", notify=told.append).exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names) and told == []
    finally:
        alive.kill()
        alive.wait()


def test_replacing_a_folder_leaves_look_alike_names_alone(tmp_path):
    target = tmp_path / "ckpt"
    for round_ in range(2):
        with atomic_path(target) as staging:
            staging.mkdir()
            (staging / "a.txt").write_text(str(round_))
        if round_ == 0:
            for name in ("ckpt.old-20241126", "ckpt.old-20240101"):
                (tmp_path / name).mkdir()
                (tmp_path / name / "README").write_text("mine")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "ckpt.old-20240101", "ckpt.old-20241126"]
    assert (tmp_path / "ckpt.old-20240101" / "README").read_text() == "mine"


HOLDING_WRITER = textwrap.dedent("""
    import sys, time
    from fastcore_train.utils.atomic import atomic_path
    with atomic_path(sys.argv[1]) as staging:
        staging.mkdir()
        print("writing", flush=True)
        time.sleep(600)
""")


def test_a_second_writer_of_one_target_is_refused_naming_the_first(tmp_path):
    """Two writers (here two processes) of one target never interleave: the second waits up to
    lock_wait for the first, then is told who holds it; a killed holder frees it at once."""
    target = tmp_path / "ckpt"
    first = subprocess.Popen([sys.executable, "-c", HOLDING_WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "writing"
        assert target_busy(target) is not None and str(first.pid) in target_busy(target)
        with pytest.raises(TargetBusyError, match=rf"being written by process {first.pid} .*folder of its own"):
            with atomic_path(target, lock_wait=0.2) as staging:
                staging.mkdir()
    finally:
        first.kill()
        first.wait()
    assert target_busy(target) is None
    with atomic_path(target, lock_wait=0.2) as staging:  # the dead holder's lock is free; its leftovers go
        staging.mkdir()
        (staging / "a.txt").write_text("second")
    assert (target / "a.txt").read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_one_process_two_writers_of_one_target(tmp_path):
    """Inside one process too (two trainers): the lock is per writer, not per process."""
    target = tmp_path / "ckpt"
    with atomic_path(target) as staging:
        staging.mkdir()
        with pytest.raises(TargetBusyError, match="this process"):
            with atomic_path(target, lock_wait=0.1):
                pass
    assert target.is_dir() and target_busy(target) is None
