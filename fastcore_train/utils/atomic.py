"""Writing files and folders so that a crash mid-write never replaces good data with bad.

Everything is first written under a temporary sibling name and then renamed into place; a
rename within one filesystem is atomic, so readers see the old version or the new one, never a
half-written one.

Temporary names carry the writing host and process (``.<name>.tmp-<host>-<pid>-<tag>``), so a
later write in the same folder can tell, without guessing, that a leftover came from a writer
of ours that is gone, and remove it.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import uuid
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

PathLike = Union[str, os.PathLike]

_ASIDE_NAME = re.compile(r"^.+\.old-[0-9a-f]{8}$")
_TEMPORARY_NAME = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-(?P<tag>[0-9a-f]{8})$")


def _host_id() -> str:
    """A short, filename-safe id of this machine, so a leftover of another host is never judged here."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def temporary_sibling(target: Path) -> Path:
    """The temporary name a write to ``target`` is staged under."""
    return target.with_name(f".{target.name}.tmp-{_host_id()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def blocking_file(path: PathLike) -> Optional[Path]:
    """The nearest existing entry at or above ``path`` when it is not a folder (so no folder can
    be made at ``path``), else None."""
    for candidate in [Path(path), *Path(path).parents]:
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _process_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as error:
        return error.errno == errno.ESRCH
    return False


def remove_stale_temporaries(folder: PathLike) -> list[Path]:
    """Remove, from ``folder``, temporaries left by a write of ours whose process has died.

    Only names this module makes are considered, only those written on this host, and only when
    the process that wrote them no longer exists; anything else is left alone. Returns what was
    removed.
    """
    folder = Path(folder)
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    host = _host_id()
    for entry in folder.iterdir():
        match = _TEMPORARY_NAME.match(entry.name)
        if match is None or match["host"] != host:
            continue
        pid = int(match["pid"])
        if pid != os.getpid() and _process_is_gone(pid):
            _remove(entry)
            removed.append(entry)
    return removed


def begin_atomic(target: PathLike, check_target: Optional[Callable[[Path], None]] = None) -> Path:
    """Check ``target`` (``check_target(target)`` raises when it must not be replaced), clear our
    dead writers' leftovers beside it, and return the temporary path to write to; then
    :func:`publish` it, or :func:`discard` it on failure. :func:`atomic_path` does all three."""
    target = Path(target)
    if check_target is not None:
        check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target.parent)
    return temporary_sibling(target)


def publish(temporary: Path, target: PathLike, check_target: Optional[Callable[[Path], None]] = None,
            previous: Optional[list[Path]] = None) -> None:
    """Put the finished ``temporary`` (from :func:`begin_atomic`) in place of ``target``.

    ``check_target`` runs again first, and ``target`` is left exactly as it was when it raises.
    A file replaces a file in one ``os.replace``. No rename puts a folder over a non-empty folder
    (nor a file over a folder, or a folder over a file), so then the old one is first moved aside
    (``<name>.old-*``) and deleted only after the new one is in place; :func:`recover_folder` puts
    it back if the process died in between. With ``previous`` (a list), the old folder is not
    deleted but appended to it, for the caller to delete once the new one is on disk
    (:func:`make_durable`).
    """
    target = Path(target)
    if check_target is not None:
        check_target(target)
    if target.is_dir() or (temporary.is_dir() and target.exists()):
        aside = target.with_name(f"{target.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(target, aside)
        os.replace(temporary, target)
        if previous is None:
            _remove(aside)
        else:
            previous.append(aside)
    else:
        os.replace(temporary, target)


def discard(temporary: Path) -> None:
    """Remove an unpublished temporary (file or folder), if it is there."""
    _remove(temporary)


@contextlib.contextmanager
def atomic_path(target: PathLike, check_target: Optional[Callable[[Path], None]] = None,
                previous: Optional[list[Path]] = None) -> Iterator[Path]:
    """Yield a temporary path to write a file or a folder to; on success it replaces ``target``
    (:func:`begin_atomic`, then :func:`publish`; the temporary is removed on failure).

    ``check_target(target)`` raises when what is at ``target`` must not be replaced; it runs
    before anything is written and again just before the replacement, and ``target`` is then
    left exactly as it was. ``previous``: see :func:`publish`.
    """
    temporary = begin_atomic(target, check_target)
    try:
        yield temporary
        publish(temporary, target, check_target, previous)
    finally:
        _remove(temporary)


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def flush_to_disk(path: PathLike) -> None:
    """fsync ``path`` (a file, or a folder with every file and folder in it) and its parent
    folder, so what was written survives a power cut, not only a crash of the process."""
    path = Path(path)
    if path.is_dir():
        for entry in sorted(path.rglob("*")):
            if entry.is_file() and not entry.is_symlink():
                _fsync(entry)
        for folder in sorted((p for p in path.rglob("*") if p.is_dir()), reverse=True):
            _fsync(folder)
    _fsync(path)
    _fsync(path.parent)


def make_durable(path: PathLike, previous: list[Path]) -> None:
    """Flush the published ``path`` to disk (:func:`flush_to_disk`), then delete the versions it
    replaced (``previous``, moved aside by :func:`publish`): until the new one is on disk, a power
    cut leaves the old one beside it."""
    path = Path(path)
    flush_to_disk(path)
    stale = [entry for entry in path.parent.iterdir() if _ASIDE_NAME.match(entry.name)
             and entry.name.rsplit(".old-", 1)[0] == path.name]  # also those of a writer killed before this point
    for aside in {*previous, *stale}:
        _remove(aside)
    if previous or stale:
        _fsync(path.parent)


def recover_folder(target: PathLike) -> Path:
    """Return ``target``, first restoring the moved-aside previous version if a crash lost it."""
    target = Path(target)
    if not target.exists() and target.parent.is_dir():
        aside = sorted(target.parent.glob(f"{target.name}.old-*"), key=os.path.getmtime)
        if aside:
            os.replace(aside[-1], target)
    return target
