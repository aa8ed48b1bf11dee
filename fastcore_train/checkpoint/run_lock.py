"""One run per run folder: a run that writes checkpoints into ``<folder>/<run>`` holds a lock on it
(``<folder>/.<run>.run.fastcore-lock``) from the start of training to its end.

Two processes started with ``run(resume_from="auto")`` on one ``CheckpointCallback`` folder (a job
requeued while the old one still runs, a command started twice) resume the same checkpoint and would
write the same names into the same run folder, one run's checkpoints replacing the other's. The
second is refused before it trains, naming the holder: the first run's files are kept whole, and
nothing of the second was written. The callbacks of one Trainer share its lock; the lock goes with
its process, so a run killed leaves none behind.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Optional

from fastcore_train.checkpoint.errors import CheckpointTargetError
from fastcore_train.utils.file_lock import OwnerLock

_SUFFIX = ".run.fastcore-lock"
_held: dict[Path, tuple[OwnerLock, Any, int]] = {}  # run folder -> (lock, holder, callbacks holding it)
_guard = threading.Lock()


class RunFolderBusyError(CheckpointTargetError):
    """Another run (another process, or another Trainer) writes checkpoints into the same run folder."""


def run_lock_path(run_folder: Path) -> Path:
    """The lock file of ``run_folder`` (beside it, hidden)."""
    return run_folder.with_name(f".{run_folder.name}{_SUFFIX}")


def acquire_run_folder(run_folder: Path, holder: Any) -> Optional[str]:
    """Take the run folder for ``holder`` (a Trainer; its callbacks share the lock): None when taken,
    else why not (the message of :class:`RunFolderBusyError`)."""
    run_folder = Path(os.path.abspath(run_folder))
    with _guard:
        held = _held.get(run_folder)
        if held is not None and held[1] is holder:
            _held[run_folder] = (held[0], holder, held[2] + 1)
            return None
        run_folder.parent.mkdir(parents=True, exist_ok=True)
        lock = OwnerLock(run_lock_path(run_folder))
        if held is None and lock.try_acquire():
            _held[run_folder] = (lock, holder, 1)
            return None
        owner = "another Trainer of this process" if held is not None else lock.owner()
    return (f"The run folder {str(run_folder)!r} is being written by {owner} (it holds {lock.path.name}): another run "
            "resumed the same checkpoint (resume_from='auto' started twice?) and writes its checkpoints there under "
            "the same names. Two runs writing one run folder would replace each other's checkpoints, so this run "
            "stops before training and nothing of it was written. Wait for the other run to end, or give this one "
            "a folder of its own (CheckpointCallback(folder=...)).")


def release_run_folder(run_folder: Path, holder: Any) -> None:
    """Give the run folder back (once every callback of ``holder`` that took it has)."""
    run_folder = Path(os.path.abspath(run_folder))
    with _guard:
        held = _held.get(run_folder)
        if held is None or held[1] is not holder:
            return
        if held[2] > 1:
            _held[run_folder] = (held[0], holder, held[2] - 1)
            return
        del _held[run_folder]
        held[0].release()
