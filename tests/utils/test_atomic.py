"""Atomic writes: a failure mid-write leaves the previous file or folder as it was."""
from __future__ import annotations

import pytest

from fastcore_train.utils.atomic import atomic_path, recover_folder


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


def test_recover_folder_restores_a_moved_aside_version(tmp_path):
    aside = tmp_path / "ckpt.old-1234abcd"
    aside.mkdir()
    (aside / "a.txt").write_text("previous")
    restored = recover_folder(tmp_path / "ckpt")
    assert (restored / "a.txt").read_text() == "previous"
    assert not aside.exists()
