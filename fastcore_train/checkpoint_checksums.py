"""The sha256 of every file of a checkpoint: written into ``meta.json`` when saving, verified before
anything is loaded, so a file changed or damaged after saving is an error naming it."""
from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastcore_train.checkpoint_errors import CheckpointChecksumError, CheckpointError
from fastcore_train.log import logger

#: The file that holds the checksums (``fastcore_train.checkpoint.META_FILE``).
META_FILE = "meta.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_checksums(folder: Path) -> dict[str, str]:
    """``{relative posix path: sha256}`` of every file under ``folder`` but its ``meta.json``.

    Files are hashed in parallel threads (hashlib releases the GIL): the model and optimizer files
    of a large checkpoint take one core each instead of one after the other."""
    paths = [path for path in sorted(folder.rglob("*")) if path.is_file() and path != folder / META_FILE]
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(paths), os.cpu_count() or 1))) as pool:
        digests = list(pool.map(_sha256, paths))
    return {path.relative_to(folder).as_posix(): digest for path, digest in zip(paths, digests)}


def verify_checksums(folder: Path, meta: dict[str, Any]) -> None:
    """Raise :class:`CheckpointChecksumError` naming the first file of ``folder`` whose content
    differs from the sha256 recorded in ``meta``, and :class:`CheckpointError` for a listed file
    gone from a folder that is still there (a whole missing entry is left to the loader, which
    names what it misses). Files added later are not checked. A checkpoint written before
    checksums existed is loaded unchecked (said once, at INFO)."""
    checksums = meta.get("checksums")
    if checksums is None:
        logger.info("Checkpoint %r has no checksums (written by an older fastcore_train): its files are "
                    "loaded without checking them.", str(folder))
        return
    for name, expected in checksums.items():
        path = folder / name
        if not path.is_file():
            if not (folder / Path(name).parts[0]).exists():
                continue  # a whole entry is gone: the loader names it if it needs it (require_file)
            raise CheckpointError(f"The checkpoint misses its file {str(path)!r}, listed in its {META_FILE}; "
                                  "it is damaged or incomplete. Resume from another checkpoint.")
        if _sha256(path) != expected:
            raise CheckpointChecksumError(
                f"Checkpoint file {str(path)!r} is not the file that was saved: its sha256 differs from the "
                f"one recorded in {META_FILE}, so it was changed or damaged after saving (a copy cut short, "
                "a disk error, an edit). It was not loaded; resume from another checkpoint, e.g. an "
                "earlier one.")
