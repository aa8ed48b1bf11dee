"""Files of the user's inside a checkpoint folder (``best/NOTES.md``, a ``model.onnx`` exported into
``last``) are never deleted with the checkpoint.

A checkpoint's own files are ``meta.json`` and those it lists (its checksums; for a checkpoint of
format 3 or older, or a folder of ``save_model``, the names the caller knows it writes). Anything
else is the user's: when the checkpoint is replaced, those files are carried into the new one at
the same place (hard links where the disk allows, else copies, made before the swap, so no moment
leaves them nowhere); when it is deleted (a top-k checkpoint dropped for a better one), only its
own files go and the folder stays with the user's. Either way a warning names them.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Iterable

from fastcore_train.checkpoint.layout import (CALLBACK_STATE_FILE, LEGACY_CALLBACK_STATE_FILE, META_FILE, MODEL_STEM,
                                              TRAINER_STATE_FILE, TRAINING_STATE_STEM)
from fastcore_train.log import logger

#: Names a checkpoint without a file record (format 3 or older) writes whatever its backend.
_KNOWN_NAMES = {META_FILE, TRAINER_STATE_FILE, CALLBACK_STATE_FILE, LEGACY_CALLBACK_STATE_FILE}


def backend_files(suffix: str) -> list[str]:
    """The names of a backend's model and training-state files (``model<suffix>``, ...)."""
    return [f"{MODEL_STEM}{suffix}", f"{TRAINING_STATE_STEM}{suffix}"]


def own_files(folder: Path, known: Iterable[str] = ()) -> set[str]:
    """The relative names (files, or folders whose every file is) that the checkpoint at ``folder``
    wrote: ``meta.json``, those its record lists and ``known``; without a readable record, also the
    names every checkpoint writes (``trainer_state.json``, the random states, ...)."""
    names = {META_FILE, *known}
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = None
    record = meta.get("checksums") if isinstance(meta, dict) else None
    if isinstance(record, dict):
        return names | set(map(str, record))
    names |= _KNOWN_NAMES
    names |= {path.name for path in folder.glob("rank_state_*.npz")}
    return names


def _is_own(name: str, own: set[str]) -> bool:
    parts = name.split("/")
    return any("/".join(parts[:depth]) in own for depth in range(1, len(parts) + 1))


def _files(folder: Path) -> list[Path]:
    """Every file (and symbolic link) under ``folder``, links not followed."""
    found = []
    for root, dirs, files in os.walk(folder):
        found += [Path(root) / name for name in files]
        found += [Path(root) / name for name in dirs if os.path.islink(os.path.join(root, name))]
    return sorted(found)


def user_files(folder: Path, known: Iterable[str] = ()) -> list[str]:
    """The relative names of the files in ``folder`` that the checkpoint did not write."""
    if not folder.is_dir():
        return []
    own = own_files(folder, known)
    return [name for name in (path.relative_to(folder).as_posix() for path in _files(folder)) if not _is_own(name, own)]


def _place(source: Path, destination: Path) -> None:
    """``source`` also at ``destination``: a hard link, else a copy (a symbolic link as a link)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        os.symlink(os.readlink(source), destination)
        return
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def carry_user_files(previous: Path, staging: Path, known: Iterable[str] = ()) -> list[str]:
    """Put the user's files of the checkpoint at ``previous`` into ``staging`` (the one about to
    replace it), at the same names; a name the new checkpoint uses itself gets ``.kept`` added.
    ``known``: the names the checkpoint's backend writes (:func:`backend_files`). Returns the names
    as they are in the new checkpoint, and warns naming them."""
    kept = []
    for name in user_files(previous, known):
        destination = staging / name
        while destination.exists() or destination.is_symlink():
            destination = destination.with_name(destination.name + ".kept")
        _place(previous / name, destination)
        kept.append(destination.relative_to(staging).as_posix())
    if kept:
        logger.warning("Checkpoint %r held files it did not write (%s): they were kept, in the checkpoint that replaces "
                       "it at the same place (they belong to the previous one). Keep your own files outside checkpoint "
                       "folders.", str(previous), ", ".join(kept))
    return kept


def remove_checkpoint(folder: Path, known: Iterable[str] = ()) -> list[str]:
    """Delete the checkpoint (or saved model) at ``folder``: the whole folder when it holds only its
    own files (``known``: names the caller wrote there besides the record), else only those, the
    folder staying with the user's files, which are returned and named in a warning."""
    if not folder.is_dir():
        return []
    kept = user_files(folder, known)
    if not kept:
        shutil.rmtree(folder, ignore_errors=True)
        return []
    for name in sorted(own_files(folder, known)):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink()
    for root, dirs, _ in sorted(os.walk(folder, topdown=False)):  # folders left empty by our files
        for name in dirs:
            with_path = Path(root) / name
            if not with_path.is_symlink() and not any(with_path.iterdir()):
                with_path.rmdir()
    logger.warning("Deleted the checkpoint %r but not the files in it that it did not write (%s): the folder now "
                   "holds only them. Keep your own files outside checkpoint folders.", str(folder), ", ".join(kept))
    return kept
