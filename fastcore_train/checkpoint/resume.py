"""Finding the checkpoint to resume from after a preemption: ``run(resume_from="auto")``.

:func:`get_last_checkpoint` (transformers' name) looks in a folder, its sub-folders and theirs
(the layout :class:`~fastcore_train.CheckpointCallback` writes: ``folder/<run>/<name>``) for the
newest *complete* checkpoint: one with our ``meta.json`` of a format this version reads, a
readable ``trainer_state.json`` and files matching their checksums. Newest means the most batches
trained (``trainer_state.json``'s ``state.global_forward_batches``), not the latest mtime: a
copied or touched folder cannot win. Hidden entries (a save's temporary folder, a previous
version moved aside) are not candidates, but a version a killed writer moved aside is first put
back in place, as loading it by name would.

``resume_from="auto"`` searches the folder of every ``CheckpointCallback(save_object="checkpoint")``
of the Trainer; ``resume_from="auto:<folder>"`` searches ``<folder>``. Either way, when there is
none the run starts fresh; one log line says which: a warning naming the folder when ``auto:<folder>``
names one that does not exist at all (a job's first start, or a mistyped path), else an info line. Under data parallel rank 0 decides and
broadcasts its choice, so every rank resumes the same folder.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Union

from fastcore_train.checkpoint.checksums import verify_checksums
from fastcore_train.checkpoint.errors import CheckpointError
from fastcore_train.checkpoint.meta import load_meta
from fastcore_train.checkpoint.reading import read_trainer_state
from fastcore_train.checkpoint.target import is_checkpoint_folder
from fastcore_train.log import logger
from fastcore_train.utils.atomic import recover_folders_in

#: ``run(resume_from=AUTO)``: the newest checkpoint of the Trainer's CheckpointCallback, or a fresh start.
AUTO = "auto"
_AUTO_PREFIX = AUTO + ":"


def is_auto(resume_from: Any) -> bool:
    """Whether ``resume_from`` asks for the newest checkpoint (``"auto"`` or ``"auto:<folder>"``)."""
    return isinstance(resume_from, str) and (resume_from == AUTO or resume_from.startswith(_AUTO_PREFIX))


def _candidates(folder: Path, depth: int = 2) -> Iterator[Path]:
    yield folder
    if depth == 0 or not folder.is_dir():
        return
    try:
        recover_folders_in(folder, notify=logger.warning)  # a killed writer's moved-aside checkpoint
        entries = sorted(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.name.startswith(".") and not entry.is_symlink():
            yield from _candidates(entry, depth - 1)


def _trained_batches(folder: Path) -> Optional[int]:
    """The batches the checkpoint in ``folder`` was taken after, or None when it is not a readable checkpoint."""
    if not is_checkpoint_folder(folder):
        return None
    try:
        batches = read_trainer_state(folder)["state"]["global_forward_batches"]
    except (CheckpointError, KeyError, TypeError):
        return None
    return batches if isinstance(batches, int) else None


def _is_intact(folder: Path) -> bool:
    try:
        verify_checksums(folder, load_meta(folder))
    except (CheckpointError, OSError, ValueError) as error:
        logger.warning("Checkpoint %r is damaged and is not resumed from: %s", str(folder), error)
        return False
    return True


def get_last_checkpoint(folder: Union[str, os.PathLike]) -> Optional[Path]:
    """The newest complete checkpoint in ``folder`` (itself, or up to two levels below it), by
    batches trained; None when there is none (or no such folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = [(batches, str(path), path) for path in _candidates(folder)
             if (batches := _trained_batches(path)) is not None]
    for _, _, path in sorted(found, key=lambda item: (-item[0], item[1])):
        if _is_intact(path):
            return path
    return None


def auto_folders(resume_from: str, callbacks: Iterable[Any]) -> list[Path]:
    """The folders ``resume_from`` (``"auto"`` or ``"auto:<folder>"``) searches."""
    if resume_from.startswith(_AUTO_PREFIX):
        given = resume_from[len(_AUTO_PREFIX):]
        if not given:
            raise ValueError("resume_from='auto:' names no folder; pass 'auto:<folder>' or 'auto'.")
        return [Path(given)]
    folders = [Path(callback.folder) for callback in callbacks
               if getattr(callback, "save_object", None) == "checkpoint" and getattr(callback, "folder", None)]
    if not folders:
        raise ValueError("resume_from='auto' resumes from the newest checkpoint of the Trainer's "
                         "CheckpointCallback(save_object='checkpoint'), and this Trainer has none: add one, or "
                         "pass resume_from='auto:<folder>' naming the folder to search.")
    return folders


def choose_resume_folder(resume_from: str, callbacks: Iterable[Any], comm: Any) -> Optional[Path]:
    """The checkpoint ``resume_from="auto..."`` resumes from (None: a fresh start), decided on rank
    0 and broadcast to every rank; one log line says which."""
    folders = auto_folders(resume_from, callbacks)  # on every rank: a wrong argument fails them all alike
    choice: Optional[str] = None
    if comm.is_global_zero():
        found = [path for path in (get_last_checkpoint(folder) for folder in folders) if path is not None]
        found.sort(key=lambda path: _trained_batches(path) or 0, reverse=True)
        choice = str(found[0]) if found else None
        searched = ", ".join(repr(str(folder)) for folder in folders)
        # A folder the user named that does not exist: a requeued job's first start, or a mistyped path.
        missing = [folder for folder in folders if not folder.exists()] if resume_from != AUTO else []
        if choice is None and missing:
            logger.warning("resume_from=%r: %s does not exist; starting a fresh run (expected on a job's first "
                           "start; otherwise check the path).", resume_from,
                           ", ".join(repr(str(folder)) for folder in missing))
        elif choice is None:
            logger.info("resume_from=%r: no complete checkpoint in %s; starting a fresh run.", resume_from, searched)
        else:
            logger.info("resume_from=%r: resuming from %r (the newest complete checkpoint in %s, after %d batches).",
                        resume_from, choice, searched, _trained_batches(Path(choice)))
    if comm.is_distributed():
        choice = comm.broadcast_object(choice, src=0)
    return None if choice is None else Path(choice)
