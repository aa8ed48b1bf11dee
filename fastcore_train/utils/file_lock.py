"""An exclusive lock on a file that says who holds it (``flock``), for writers that must not overlap:
two saves to one checkpoint (:mod:`fastcore_train.utils.atomic`), two runs writing one run folder."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from pathlib import Path
from typing import Optional


class OwnerLock:
    """An exclusive ``flock`` on the file at ``path``; the file holds the owner's pid and host (for
    the message) and is removed on release. A lock file removed under a waiting writer is detected
    (its inode changed) and taken afresh, so two writers never both hold one. Held per open file,
    so two holders in one process exclude each other as two processes do."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._descriptor: Optional[int] = None

    def try_acquire(self) -> bool:
        """Take the lock if it is free (True); False when another holder has it."""
        while True:
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(descriptor)
                return False
            except OSError as error:  # a filesystem without locks (some network mounts): write unlocked
                os.close(descriptor)
                if error.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    return True
                raise
            try:
                same = os.stat(self.path).st_ino == os.fstat(descriptor).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(descriptor, 0)
                os.write(descriptor, f"{os.getpid()} {socket.gethostname()}\n".encode())
                self._descriptor = descriptor
                return True
            os.close(descriptor)  # released and removed by its previous owner meanwhile: take the new one

    def owner(self) -> str:
        """Who holds the lock, as written in its file: ``process <pid> on <host>``."""
        try:
            pid, host = self.path.read_text(encoding="utf-8").split()[:2]
        except (OSError, ValueError):
            return "another writer"
        return f"process {pid} on {host}" + (" (this process: another trainer or thread)"
                                             if pid == str(os.getpid()) else "")

    def release(self) -> None:
        """Remove the lock file and free the lock (a no-op when not held)."""
        if self._descriptor is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self._descriptor)  # (closing releases the flock)
        self._descriptor = None
