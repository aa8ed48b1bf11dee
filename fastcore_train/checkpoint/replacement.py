"""Loading a checkpoint while another process replaces it (``last``, saved again every epoch).

A save replaces a checkpoint folder by renaming: the old one aside, the new one into place. A load
that reads ``meta.json`` from one version and a file from the next finds a checksum that differs, and
one that looks between the two renames finds no folder: no version was damaged, one was replaced.
The loader notes the folder's identity (its inode) before reading; when reading fails and the
identity changed meanwhile (or the folder is gone while a writer holds its lock), the checkpoint was
being replaced: the load is tried again, a bounded number of times, then
:class:`CheckpointReplacedError` says so and suggests retrying. A failure with the same folder in
place is real damage and is raised as it is.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from fastcore_train.checkpoint.errors import CheckpointError
from fastcore_train.utils.atomic import target_busy, through_link

#: How many times a load is tried when the checkpoint was replaced while it was read.
LOAD_TRIES = 5


class CheckpointReplacedError(CheckpointError):
    """The checkpoint was replaced by another save every time it was read (load it again)."""


def folder_identity(folder: Path) -> Optional[tuple[int, int]]:
    """``(device, inode)`` of the folder at ``folder`` (a symbolic link followed), None when there is none."""
    try:
        stat = os.stat(through_link(folder))
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def replaced_since(folder: Path, identity: Optional[tuple[int, int]]) -> bool:
    """Whether ``folder`` is no longer the folder of ``identity`` (None: there was none): another one
    is in its place, or none is while a writer holds its lock (between a save's two renames)."""
    now = folder_identity(folder)
    if now is not None:
        return now != identity
    try:
        return target_busy(through_link(folder)) is not None
    except FileNotFoundError:
        return False


def replaced_error(folder: Path, tries: int, error: BaseException) -> CheckpointReplacedError:
    return CheckpointReplacedError(
        f"Checkpoint {str(folder)!r} was being replaced by another save each of the {tries} times it was read (its "
        f"files changed under the reader: {type(error).__name__}: {error}). No version was loaded; nothing is "
        "damaged. Load it again once the other process has saved (or load another checkpoint).")
