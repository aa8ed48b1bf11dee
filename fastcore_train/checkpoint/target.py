"""Where a checkpoint may be written: only over nothing, an empty folder, or a checkpoint of ours.

Anything else at the target belongs to the user and is never replaced (see
:mod:`fastcore_train.checkpoint`, which re-exports these).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from fastcore_train.checkpoint.checksums import META_FILE
from fastcore_train.checkpoint.errors import CheckpointTargetError
from fastcore_train.utils.atomic import blocking_file, dangling_link_problem, target_busy, through_link


def is_checkpoint_folder(folder: Path) -> bool:
    """True when ``folder`` holds a meta file written by :func:`write_checkpoint`."""
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "format_version" in meta and "fastcore_train_version" in meta


def checkpoint_target_problem(folder: os.PathLike) -> Optional[str]:
    """Why a checkpoint must not be written to ``folder``, or None when it may.

    It may when nothing is there, when an empty folder is there, or when a checkpoint of ours is
    there (it is replaced whole). Everything else belongs to the user and is never replaced.
    """
    folder = Path(folder)
    resolved = folder.resolve()
    if folder.name in ("", ".", "..") or resolved == Path.cwd().resolve() or resolved in Path.cwd().resolve().parents:
        return (f"save_checkpoint({str(folder)!r}) would replace the current directory or one above it. "
                "A checkpoint is a folder of its own: pass a new folder name, e.g. 'checkpoints/last'.")
    dangling = dangling_link_problem(folder)
    if dangling is not None:
        return f"Cannot write a checkpoint: {dangling}"
    blocker = blocking_file(folder)
    if blocker == folder:
        return (f"{str(folder)!r} is a file, not a checkpoint folder; it was left untouched. "
                "Pass a folder name that is free (or a checkpoint folder to replace).")
    if blocker is not None:
        return (f"Cannot write a checkpoint to {str(folder)!r}: {str(blocker)!r} is a file, not a "
                "folder. Pass a path whose parents are folders.")
    if folder.is_dir() and any(folder.iterdir()) and not is_checkpoint_folder(folder):
        return (f"{str(folder)!r} already holds files and is not a fastcore_train checkpoint (no "
                f"{META_FILE} of ours); save_checkpoint replaces only checkpoints it wrote, so the folder "
                "was left untouched. Pass a new folder (e.g. a subfolder of it) or empty it first.")
    return None


def check_checkpoint_target(folder: os.PathLike) -> None:
    """Raise :class:`CheckpointTargetError` when :func:`checkpoint_target_problem` finds one."""
    problem = checkpoint_target_problem(folder)
    if problem is not None:
        raise CheckpointTargetError(problem)


def concurrent_writer_problem(folder: os.PathLike) -> Optional[str]:
    """Why a checkpoint cannot be written to ``folder`` right now: another writer (another
    Trainer, in this process or another) holds its lock; None when nobody does."""
    try:
        owner = target_busy(through_link(folder))  # (the lock is taken beside what a link points to)
    except FileNotFoundError:
        return None  # a link to nothing: checkpoint_target_problem says so
    if owner is None:
        return None
    return (f"Cannot save a checkpoint to {str(folder)!r}: {owner} is saving one there right now, and two "
            "writers to one folder would overwrite each other. Give each Trainer (each run) a checkpoint "
            "folder of its own.")
