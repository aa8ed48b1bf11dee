"""Writing files and folders so that a crash mid-write never replaces good data with bad.

Everything is first written under a temporary sibling name and then renamed into place; a
rename within one filesystem is atomic, so readers see the old version or the new one, never a
half-written one.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Iterator, Union

PathLike = Union[str, os.PathLike]


def _sibling(target: Path, tag: str) -> Path:
    return target.with_name(f".{target.name}.{tag}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextlib.contextmanager
def atomic_path(target: PathLike) -> Iterator[Path]:
    """Yield a temporary path to write a file or a folder to; on success it replaces ``target``.

    A file replaces a file in one ``os.replace``. No rename puts a folder over a non-empty folder
    (nor a file over a folder, or a folder over a file), so then the old one is first moved aside
    (``<name>.old-*``) and deleted only after the new one is in place; :func:`recover_folder` puts
    it back if the process died in between.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = _sibling(target, "tmp")
    try:
        yield temporary
        if target.is_dir() or (temporary.is_dir() and target.exists()):
            # No rename replaces a folder, or a file by a folder: move the old one aside first.
            aside = target.with_name(f"{target.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(target, aside)
            os.replace(temporary, target)
            _remove(aside)
        else:
            os.replace(temporary, target)
    finally:
        _remove(temporary)


def recover_folder(target: PathLike) -> Path:
    """Return ``target``, first restoring the moved-aside previous version if a crash lost it."""
    target = Path(target)
    if not target.exists() and target.parent.is_dir():
        aside = sorted(target.parent.glob(f"{target.name}.old-*"), key=os.path.getmtime)
        if aside:
            os.replace(aside[-1], target)
    return target
