"""The checksum of every file of a checkpoint: written into ``meta.json`` when saving, verified
before anything is loaded, so a file changed or damaged after saving is an error naming it.

The checksum is XXH3-128 (the ``xxhash`` package): it catches damage (a copy cut short, a flipped
bit, an edit) as surely as a cryptographic hash does, at ~20 GB/s instead of sha256's ~1.7 GB/s,
so hashing a 300 MB checkpoint costs ~15 ms rather than as much as writing it. It is not a
signature: whoever can change a file can change ``meta.json`` too (what loading refuses to run
is decided by the safe loaders, not by checksums).

Saving: files written through :class:`HashingFile` (every backend's model and training state but
oneflow's, the JSON and random-state files) are hashed while they are written, on a helper thread
beside each large write; a file a framework writes by path alone (oneflow's folders) is hashed
from the page cache on a helper thread (:class:`BackgroundHashes`) while the next one is written.
Loading: :class:`Verification` hashes every listed file on helper threads while the framework
reads them, and is joined before anything read is put into the model (xxhash releases the GIL),
so the check costs no second pass on the training thread.
Checkpoints written before format 4 recorded sha256 and are verified with it.
"""
from __future__ import annotations

import hashlib
import io
import mmap
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Callable, Iterable, Optional

import xxhash

from fastcore_train.checkpoint.errors import CheckpointChecksumError, CheckpointError
from fastcore_train.checkpoint.layout import ALGORITHM, ALGORITHM_KEY, META_FILE
from fastcore_train.checkpoint.record import check_record
from fastcore_train.log import logger

_HASHERS: dict[str, Callable[[], Any]] = {"xxh3_128": xxhash.xxh3_128, "sha256": hashlib.sha256}


def new_hasher(algorithm: str = ALGORITHM) -> Any:
    """A fresh hash object (``update``/``hexdigest``) of ``algorithm``."""
    try:
        return _HASHERS[algorithm]()
    except (KeyError, TypeError):
        raise CheckpointError(f"The checkpoint's {META_FILE} names checksum algorithm {algorithm!r}, which this "
                              f"fastcore_train does not know ({', '.join(sorted(_HASHERS))}): the file is damaged or "
                              "was edited, or it was written by a newer version. Resume from another checkpoint, or "
                              "load it with the version that wrote it.") from None


def digest_of_file(path: Path, algorithm: str = ALGORITHM) -> str:
    """The checksum of the file at ``path`` (mapped into memory: no copy through Python)."""
    digest = new_hasher(algorithm)
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                digest.update(mapped)
    return digest.hexdigest()


class HashingFile(io.RawIOBase):
    """A writable binary file that hashes what passes through it, for frameworks that save to a
    file object (``torch.save``): the checksum is ready when the write ends, with no read-back.
    A large block is hashed on a helper thread while it is written (both release the GIL), so the
    hash costs next to nothing beside the write. Seeking back (to patch a header) makes the running
    hash invalid; :attr:`hexdigest` is then None and the file is read back instead."""

    #: Blocks at least this large are hashed beside their write (smaller ones inline).
    PARALLEL_BLOCK = 4 << 20

    def __init__(self, handle: BinaryIO, hasher: Any = None) -> None:
        """``handle``: where the bytes go (a file, or another HashingFile to compute two hashes at
        once); ``hasher``: the hash object (default: a new XXH3-128)."""
        super().__init__()
        self._handle = handle
        self.name = getattr(handle, "name", None)  # the path, as a file object's name is
        self._digest = new_hasher() if hasher is None else hasher
        self._position = 0
        self._valid = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        hashing = None
        if self._valid:
            if view.nbytes >= self.PARALLEL_BLOCK:  # (the block stays valid: joined before returning)
                hashing = threading.Thread(target=self._digest.update, args=(view,), name="fastcore-hash")
                hashing.start()
            else:
                self._digest.update(view)
        try:
            written = self._handle.write(view)
        finally:
            if hashing is not None:
                hashing.join()
        self._position += written
        return written

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        position = self._handle.seek(offset, whence)
        if position != self._position:
            self._valid = False
            self._position = position
        return position

    def flush(self) -> None:
        self._handle.flush()

    @property
    def hexdigest(self) -> Optional[str]:
        """The checksum of everything written, or None if the writer seeked back."""
        return self._digest.hexdigest() if self._valid else None


def write_hashed(path: Path, write: Callable[[BinaryIO], None]) -> Optional[str]:
    """Open ``path``, let ``write(file)`` fill it through a :class:`HashingFile`; return the
    checksum (None when it must be read back)."""
    with open(path, "wb") as handle:
        hashing = HashingFile(handle)
        write(hashing)  # type: ignore[arg-type]
        hashing.flush()
        return hashing.hexdigest


def _hash_pool(jobs: int, spare_a_core: bool = False) -> ThreadPoolExecutor:
    """Up to 4 hashing threads, no more than ``jobs`` nor the cores (less one with ``spare_a_core``:
    the training thread reads meanwhile)."""
    cores = (os.cpu_count() or 1) - (1 if spare_a_core else 0)
    return ThreadPoolExecutor(max_workers=max(1, min(4, jobs, cores)), thread_name_prefix="fastcore-hash")


class BackgroundHashes:
    """Checksums of files a framework wrote by path (it takes no file object), computed on helper
    threads from the page cache while the training thread writes the next file: :meth:`add` after
    each such file (or folder) is written, :meth:`result` once all are. :meth:`close` (also on
    an error) waits for the threads."""

    def __init__(self, staging: Path) -> None:
        self._staging = staging
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pending: dict[str, Any] = {}

    def add(self, path: Path) -> None:
        """Start hashing ``path``: a file, or every file of a folder."""
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        if self._pool is None:
            self._pool = _hash_pool(4)
        for file in files:
            self._pending[file.relative_to(self._staging).as_posix()] = self._pool.submit(digest_of_file, file)

    def result(self) -> dict[str, str]:
        """``{relative posix path: checksum}`` of every file added; raises a hashing error."""
        try:
            return {name: future.result() for name, future in self._pending.items()}
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def file_checksums(folder: Path, known: Optional[dict[str, str]] = None) -> dict[str, str]:
    """``{relative posix path: checksum}`` of every file under ``folder`` but its ``meta.json``;
    ``known`` holds checksums already computed while writing. The others are hashed in parallel
    threads (xxhash releases the GIL)."""
    known = known or {}
    paths = [path for path in sorted(folder.rglob("*")) if path.is_file() and path != folder / META_FILE]
    names = [path.relative_to(folder).as_posix() for path in paths]
    todo = [path for path, name in zip(paths, names) if name not in known]
    with _hash_pool(len(todo)) as pool:
        computed = dict(zip(todo, pool.map(digest_of_file, todo)))
    return {name: known[name] if name in known else computed[path] for path, name in zip(paths, names)}


def verify_checksums(folder: Path, meta: dict[str, Any], needed: Iterable[str] = ()) -> None:
    """Raise :class:`CheckpointChecksumError` naming the first file of ``folder`` whose content
    differs from the checksum recorded in ``meta``, and :class:`CheckpointError` for a listed file
    gone from a folder that is still there (a whole missing entry is left to the loader, which
    names what it misses). Files added later are not checked. A checkpoint written before
    checksums existed (format < 4 without them) is loaded unchecked (said once, at INFO); one of
    format 4 on without them is :class:`CheckpointChecksumError` naming ``meta.json``, as is a
    record that is not whole or names anything but plain files inside the folder, or that lacks one
    of ``needed`` (:func:`~fastcore_train.checkpoint.record.check_record`).
    (:class:`Verification` does the same beside the framework's reads.)"""
    with Verification(folder, meta, needed) as verification:
        verification.result()


class Verification:
    """The check of :func:`verify_checksums`, run on helper threads: what needs no file content
    (the record is whole, the algorithm known, no listed file missing) is checked at once, in the
    constructor; the files are hashed in the background while the caller reads them, and
    :meth:`result` waits for the hashes and raises the first mismatch, in the record's order.
    Use it as a context manager so that the threads are joined whatever happens; call
    :meth:`result` before putting anything read into the model."""

    def __init__(self, folder: Path, meta: dict[str, Any], needed: Iterable[str] = ()) -> None:
        """``needed``: the names the caller reads (each must have a checksum, see :func:`check_record`)."""
        self._folder = folder
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pending: list[tuple[Path, str, Any]] = []
        checksums = meta.get("checksums")
        check_record(folder, meta, needed)  # before any file is opened
        if checksums is None:
            logger.info("Checkpoint %r has no checksums (written by an older fastcore_train): its files are "
                        "loaded without checking them.", str(folder))
            return
        self._algorithm = algorithm = meta.get(ALGORITHM_KEY, "sha256")
        new_hasher(algorithm)  # an unknown algorithm is an error before any file is read
        todo = []
        for name, expected in checksums.items():
            path = folder / name
            if not path.is_file():
                if not (folder / Path(name).parts[0]).exists():
                    continue  # a whole entry is gone: the loader names it if it needs it (require_file)
                raise CheckpointError(f"The checkpoint misses its file {str(path)!r}, listed in its {META_FILE}; "
                                      "it is damaged or incomplete. Resume from another checkpoint.")
            todo.append((path, expected))
        # The largest first: they take longest, and the framework reads them first.
        todo.sort(key=lambda item: -item[0].stat().st_size)
        if todo:
            self._pool = _hash_pool(len(todo), spare_a_core=True)
            self._pending = [(path, expected, self._pool.submit(digest_of_file, path, algorithm))
                             for path, expected in todo]
        self._order = {name: index for index, name in enumerate(checksums)}

    def result(self) -> None:
        """Wait for every hash; raise :class:`CheckpointChecksumError` for the first file (in
        ``meta.json``'s order) that differs, or the error reading one."""
        try:
            pending = sorted(self._pending, key=lambda item: self._order[item[0].relative_to(self._folder).as_posix()])
            for path, expected, future in pending:
                if future.result() != expected:
                    raise CheckpointChecksumError(
                        f"Checkpoint file {str(path)!r} is not the file that was saved: its {self._algorithm} checksum "
                        f"differs from the one recorded in {META_FILE}, so it was changed or damaged after saving (a "
                        f"copy cut short, a disk error, an edit; or {META_FILE}'s record of it was). It was not "
                        "loaded; resume from another checkpoint, e.g. an earlier one.")
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "Verification":
        return self

    def __exit__(self, kind: Optional[type], error: Optional[BaseException], trace: Optional[TracebackType]) -> None:
        self.close()
