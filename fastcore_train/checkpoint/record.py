"""The file record of a checkpoint's ``meta.json`` (``"files"`` and ``"checksums"``), checked before
any file is opened: it is whole, its two halves agree, and every name in it is a plain file inside
the folder.

A record that lost an entry would let a damaged file load unchecked, and a name such as
``../victim.txt``, ``/etc/passwd`` or a symbolic link out of the folder would make loading read a
file that is no part of the checkpoint; both are a :class:`CheckpointChecksumError` (a
:class:`CheckpointError`) naming ``meta.json``, so nothing is read.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Optional

from fastcore_train.checkpoint.errors import CheckpointChecksumError
from fastcore_train.checkpoint.layout import ALGORITHM_KEY, FILES_KEY, META_FILE

#: From this format on, every checkpoint records its checksums and their algorithm.
CHECKSUMS_REQUIRED_FROM = 4
#: From this format on, ``meta.json`` also lists its files (``"files"``), the same names as its checksums.
FILE_LIST_FROM = 5


def _refuse(folder: Path, what: str) -> CheckpointChecksumError:
    return CheckpointChecksumError(
        f"{str(folder / META_FILE)!r} {what}: the file was damaged or edited, so the checkpoint's files cannot be "
        "checked and none was opened. Resume from another checkpoint.")


def name_problem(folder: Path, name: Any) -> Optional[str]:
    """Why ``name`` (from a file record) is not a plain file inside ``folder``, or None when it is
    (or when nothing is there: a missing file is the loader's to name). Looks at the names and at
    ``lstat`` only: nothing is opened or followed."""
    if not isinstance(name, str) or not name:
        return f"{name!r} is not a file name"
    pure = PurePosixPath(name)
    if pure.is_absolute() or "\\" in name or "\0" in name:
        return f"{name!r} is an absolute path, not a name inside the folder"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return f"{name!r} leads out of the folder"
    path = folder
    parts = pure.parts
    for index, part in enumerate(parts):
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return None
        except OSError as error:
            return f"{name!r} cannot be looked at ({error.strerror})"
        if stat.S_ISLNK(mode):
            return f"{name!r} is a symbolic link (to {os.readlink(path)!r}), not a file of the checkpoint"
        last = index == len(parts) - 1
        if last and not stat.S_ISREG(mode):
            return f"{name!r} is not a regular file"
        if not last and not stat.S_ISDIR(mode):
            return f"{name!r} passes through {part!r}, which is not a folder"
    return None


def check_record(folder: Path, meta: dict[str, Any], needed: Iterable[str] = ()) -> None:
    """Raise :class:`CheckpointChecksumError` naming ``meta.json`` unless its file record is whole.

    Format 4 on: ``"checksums"`` (names to checksums) and the algorithm are there. Format 5 on:
    ``"files"`` lists exactly the names that have a checksum (a checksum lost, or one for no listed
    file, is refused). Any format: every name is a plain file inside ``folder``, and each of
    ``needed`` (the files the caller is about to read; a folder means every file under it) has a
    checksum when the record exists.
    """
    version = meta.get("format_version")
    checksums = meta.get("checksums")
    recorded = isinstance(version, int) and version >= CHECKSUMS_REQUIRED_FROM
    if recorded:
        missing = [key for key in ("checksums", ALGORITHM_KEY) if key not in meta]
        if missing:
            raise _refuse(folder, f"has no {' and no '.join(repr(key) for key in missing)}, which every checkpoint "
                                  f"of format {version} records")
    if checksums is None:
        return
    if not isinstance(checksums, dict) or not all(isinstance(value, str) for value in checksums.values()):
        raise _refuse(folder, "has a damaged 'checksums' entry")
    names = list(checksums)
    if isinstance(version, int) and version >= FILE_LIST_FROM:
        files = meta.get(FILES_KEY)
        if not isinstance(files, list):
            raise _refuse(folder, f"has no list of its files ({FILES_KEY!r}), which every checkpoint of format "
                                  f"{version} records")
        unchecked = sorted(set(map(str, files)) - set(names))
        unlisted = sorted(set(names) - set(map(str, files)))
        if unchecked or unlisted or len(files) != len(set(files)):
            what = (f"lists {', '.join(map(repr, unchecked))} without a checksum" if unchecked else
                    f"has a checksum for {', '.join(map(repr, unlisted))}, which it does not list" if unlisted else
                    "lists a file twice")
            raise _refuse(folder, what)
        names += [name for name in files if name not in checksums]
    for name in names:
        problem = name_problem(folder, name)
        if problem is not None:
            raise _refuse(folder, f"names {problem}")
    listed = set(names)
    for name in needed:
        path = folder / name
        inside = [p.relative_to(folder).as_posix() for p in sorted(path.rglob("*")) if p.is_file()] \
            if path.is_dir() and not path.is_symlink() else [name] if path.exists() or path.is_symlink() else []
        lost = [entry for entry in inside if entry not in listed]
        if lost:
            raise _refuse(folder, f"has no checksum for {lost[0]!r}, which the checkpoint holds and loading reads")
