"""Writing files and folders so that a crash mid-write never replaces good data with bad.

Everything is first written under a temporary sibling name and then renamed into place; a
rename within one filesystem is atomic, so readers see the old version or the new one, never a
half-written one.

Temporary names carry the writing host and process (``.<name>.tmp-<host>-<pid>-<tag>``), and so
do the previous versions moved aside while a folder is replaced (``.<name>.old-<host>-<pid>-<tag>``):
a later write in the same folder can tell, without guessing, that a leftover came from a writer of
ours that is gone, and remove it. Names of any other shape (``ckpt.old-20241126``, a user's
backup) are never touched.

One writer at a time per target: :func:`begin_atomic` takes an exclusive lock
(``.<name>.lock``, ``flock``) held until :func:`publish` or :func:`discard`, so two writers (two
trainers, two processes) saving to one place cannot interleave; the second is told who holds it.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

from fastcore_train.utils.file_lock import OwnerLock

PathLike = Union[str, os.PathLike]

_TEMPORARY_NAME = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-(?P<tag>[0-9a-f]{8})$")
_ASIDE_NAME = re.compile(r"^\.(?P<name>.+)\.old-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-(?P<tag>[0-9a-f]{8})$")
_LOCK_SUFFIX = ".fastcore-lock"
_LOCK_NAME = re.compile(r"^\..+\.fastcore-lock$")
#: How long :func:`begin_atomic` waits for another writer's lock on the same target to be freed.
LOCK_WAIT_SECONDS = 60.0


class TargetBusyError(RuntimeError):
    """Another writer (another trainer or process) is writing to the same target right now."""


def _host_id() -> str:
    """A short, filename-safe id of this machine, so a leftover of another host is never judged here."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def temporary_sibling(target: Path) -> Path:
    """The temporary name a write to ``target`` is staged under."""
    return target.with_name(f".{target.name}.tmp-{_host_id()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def aside_sibling(target: Path) -> Path:
    """The name the previous version of ``target`` is moved aside to while it is replaced."""
    return target.with_name(f".{target.name}.old-{_host_id()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def lock_path(target: Path) -> Path:
    """The lock file that serialises writers of ``target`` (beside it, hidden)."""
    return target.with_name(f".{target.name}{_LOCK_SUFFIX}")


_held_locks: dict[Path, OwnerLock] = {}  # by temporary path, from begin_atomic to publish/discard
_held_locks_guard = threading.Lock()


def _lock_target(target: Path, wait: float) -> OwnerLock:
    lock = OwnerLock(lock_path(target))
    deadline = time.monotonic() + wait
    while not lock.try_acquire():
        if time.monotonic() >= deadline:
            raise TargetBusyError(
                f"{str(target)!r} is being written by {lock.owner()} (it holds {lock.path.name}); two writers to "
                "one place would overwrite each other's files. Give each run (each Trainer) a folder of its "
                "own, or wait for the other save to finish.")
        time.sleep(0.05)
    return lock


def target_busy(target: Path) -> Optional[str]:
    """Who is writing ``target`` now (a description), or None when nobody is."""
    lock = OwnerLock(lock_path(Path(target)))
    if not lock.path.exists():
        return None
    if lock.try_acquire():
        lock.release()
        return None
    return lock.owner()


def blocking_file(path: PathLike) -> Optional[Path]:
    """The nearest existing entry at or above ``path`` when it is not a folder (so no folder can
    be made at ``path``), else None."""
    for candidate in [Path(path), *Path(path).parents]:
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def dangling_link_problem(path: PathLike) -> Optional[str]:
    """Why nothing can be written at ``path`` when it is a symbolic link to nothing (a disk not
    mounted, a link made before its folder), else None."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        return (f"{str(path)!r} is a symbolic link to {os.readlink(path)!r}, which does not exist; nothing was "
                "written. Create what it points to (mount the disk, make the folder), or remove the link.")
    return None


def through_link(target: PathLike) -> Path:
    """Where writing ``target`` goes: ``target`` itself, or the place it links to when it is a
    symbolic link (a mounted disk, a ``latest`` link), so that the link stays and what it points to
    gets the content. A link to nothing is a :class:`FileNotFoundError` saying so."""
    target = Path(target)
    if not target.is_symlink():
        return target
    problem = dangling_link_problem(target)
    if problem is not None:
        raise FileNotFoundError(problem)
    return Path(os.path.realpath(target))


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
        if _LOCK_NAME.match(entry.name) and entry.is_file():  # a lock file no writer holds (its writer died)
            lock = OwnerLock(entry)
            if lock.try_acquire():
                lock.release()
            continue
        match = _TEMPORARY_NAME.match(entry.name)
        if match is None or match["host"] != host:
            continue
        pid = int(match["pid"])
        if pid != os.getpid() and _process_is_gone(pid):
            _remove(entry)
            removed.append(entry)
    return removed


def begin_atomic(target: PathLike, check_target: Optional[Callable[[Path], None]] = None,
                 lock_wait: float = LOCK_WAIT_SECONDS) -> Path:
    """Check ``target`` (``check_target(target)`` raises when it must not be replaced), take the
    writer's lock on it, clear our dead writers' leftovers beside it, and return the temporary path
    to write to; then :func:`publish` it, or :func:`discard` it on failure (either releases the
    lock). :func:`atomic_path` does all three.
    ``lock_wait``: how long to wait for another writer of ``target`` before :class:`TargetBusyError`.
    """
    if check_target is not None:
        check_target(Path(target))
    target = through_link(target)  # a symbolic link is written through: it stays, its target gets the content
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock_target(target, lock_wait)
    remove_stale_temporaries(target.parent)
    temporary = temporary_sibling(target)
    with _held_locks_guard:
        _held_locks[temporary] = lock
    return temporary


def _release(temporary: Path) -> None:
    with _held_locks_guard:
        lock = _held_locks.pop(temporary, None)
    if lock is not None:
        lock.release()


def publish(temporary: Path, target: PathLike, check_target: Optional[Callable[[Path], None]] = None,
            previous: Optional[list[Path]] = None) -> None:
    """Put the finished ``temporary`` (from :func:`begin_atomic`) in place of ``target``.

    ``check_target`` runs again first, and ``target`` is left exactly as it was when it raises.
    A file replaces a file in one ``os.replace``. No rename puts a folder over a non-empty folder
    (nor a file over a folder, or a folder over a file), so then the old one is first moved aside
    (:func:`aside_sibling`) and deleted only after the new one is in place; :func:`recover_folder`
    puts it back if the process died in between. With ``previous`` (a list), the old folder is not
    deleted but appended to it, for the caller to delete once the new one is on disk
    (:func:`make_durable`). The writer's lock on ``target`` is released either way. A symbolic link
    at ``target`` stays: what it points to is replaced (:func:`through_link`).
    """
    try:
        if check_target is not None:
            check_target(Path(target))
        target = through_link(target)
        if target.is_dir() or (temporary.is_dir() and target.exists()):
            aside = aside_sibling(target)
            os.replace(target, aside)
            try:
                os.replace(temporary, target)
            except BaseException:
                os.replace(aside, target)  # the previous version back where it was
                raise
            if previous is None:
                _remove(aside)
            else:
                previous.append(aside)
        else:
            os.replace(temporary, target)
    finally:
        _release(temporary)


def discard(temporary: Path) -> None:
    """Remove an unpublished temporary (file or folder), if it is there, and release its lock."""
    try:
        _remove(temporary)
    finally:
        _release(temporary)


@contextlib.contextmanager
def atomic_path(target: PathLike, check_target: Optional[Callable[[Path], None]] = None,
                previous: Optional[list[Path]] = None, lock_wait: float = LOCK_WAIT_SECONDS) -> Iterator[Path]:
    """Yield a temporary path to write a file or a folder to; on success it replaces ``target``
    (:func:`begin_atomic`, then :func:`publish`; the temporary is removed on failure).

    ``check_target(target)`` raises when what is at ``target`` must not be replaced; it runs
    before anything is written and again just before the replacement, and ``target`` is then
    left exactly as it was. ``previous``: see :func:`publish`.
    """
    temporary = begin_atomic(target, check_target, lock_wait)
    try:
        yield temporary
        publish(temporary, target, check_target, previous)
    finally:
        discard(temporary)


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
    path = through_link(path)
    flush_to_disk(path)
    stale = _dead_writers_asides(path)  # also those of a writer killed before this point
    for aside in {*previous, *stale}:
        _remove(aside)
    if previous or stale:
        _fsync(path.parent)


def _dead_writers_asides(target: Path) -> list[Path]:
    """Previous versions of ``target`` moved aside by a writer of ours, on this host, whose
    process is gone (its own asides it deletes itself)."""
    if not target.parent.is_dir():
        return []
    host, found = _host_id(), []
    for entry in target.parent.iterdir():
        match = _ASIDE_NAME.match(entry.name)
        if match and match["name"] == target.name and match["host"] == host \
                and int(match["pid"]) != os.getpid() and _process_is_gone(int(match["pid"])):
            found.append(entry)
    return found


def recover_folders_in(folder: PathLike, notify: Optional[Callable[[str], None]] = None) -> None:
    """:func:`recover_folder` for every target in ``folder`` that a writer of ours moved aside."""
    folder = Path(folder)
    names = {match["name"] for entry in folder.iterdir() if (match := _ASIDE_NAME.match(entry.name))}
    for name in sorted(names):
        recover_folder(folder / name, notify)


def recover_folder(target: PathLike, notify: Optional[Callable[[str], None]] = None) -> Path:
    """Return ``target``, first restoring the previous version a writer of ours moved aside
    (:func:`aside_sibling`) if it died before putting the new one in place. Only that name, from
    this host, of a process that is gone, is ever restored; ``notify(message)`` is told when one is."""
    given = Path(target)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given  # (what a link points to was replaced)
    if not target.exists() and not target.is_symlink():
        asides = sorted(_dead_writers_asides(target), key=os.path.getmtime)
        if asides:
            os.replace(asides[-1], target)
            if notify is not None:
                notify(f"{str(target)!r} was missing: a save replacing it was interrupted after moving the previous "
                       f"version aside; that version ({asides[-1].name}) was put back in place.")
    return given
