"""``meta.json`` itself: sealed with a checksum of its own content when written, read back only whole.

The checksums in ``meta.json`` guard every other file; this guards ``meta.json``. Its content (every
key but the seal, as canonical JSON: sorted keys, no spaces) is hashed with XXH3-128 into
``"meta_checksum"``, so any change to a value or a key, by a flipped byte or an edit, is an error
naming the file rather than a checkpoint read with a wrong backend, a lost checksum or a changed
format. Re-indenting the file changes nothing it says, and is accepted. Checkpoints of format 4
and older have no seal and are read as before.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import xxhash

from fastcore_train.checkpoint.errors import CheckpointChecksumError, CheckpointError
from fastcore_train.checkpoint.layout import ALGORITHM, ALGORITHM_KEY, FILES_KEY, META_CHECKSUM_KEY, META_FILE

#: From this format on, ``meta.json`` carries the checksum of its own content.
SEALED_FROM = 5


def meta_digest(meta: dict[str, Any]) -> str:
    """The checksum of ``meta``'s content: every key but ``meta_checksum`` (and ``folder``, which
    reading adds), as canonical JSON."""
    content = {key: value for key, value in meta.items() if key not in (META_CHECKSUM_KEY, "folder")}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return xxhash.xxh3_128(text.encode("utf-8")).hexdigest()


def sealed_meta(meta: dict[str, Any], checksums: dict[str, str]) -> dict[str, Any]:
    """``meta`` with its file record (``files``, ``checksums``, the algorithm) and its seal, as written."""
    record = dict(meta, **{FILES_KEY: sorted(checksums), "checksums": checksums, ALGORITHM_KEY: ALGORITHM})
    record[META_CHECKSUM_KEY] = meta_digest(record)
    return record


def _damaged(path: Path, what: str) -> CheckpointChecksumError:
    return CheckpointChecksumError(
        f"{str(path)!r} {what}: it was damaged or edited after saving, so the checkpoint cannot be trusted and "
        "nothing of it was loaded. Resume from another checkpoint.")


def check_meta(path: Path, meta: Any) -> dict[str, Any]:
    """``meta`` (parsed from ``path``) when it is whole: a dict whose seal matches its content (a
    seal is required from format 5 on) and which names its backend; else
    :class:`CheckpointChecksumError` naming ``path``."""
    if not isinstance(meta, dict):
        raise CheckpointError(f"{str(path)!r} holds a {type(meta).__name__}, not a checkpoint's metadata; it is "
                              "damaged. Pick another checkpoint.")
    version = meta.get("format_version")
    seal = meta.get(META_CHECKSUM_KEY)
    if seal is None:
        if not isinstance(version, int) or version >= SEALED_FROM:
            raise _damaged(path, f"has no {META_CHECKSUM_KEY!r} (the checksum of its own content, which every "
                                 f"checkpoint of format {SEALED_FROM} on records)")
    elif seal != meta_digest(meta):
        raise _damaged(path, "does not match its own checksum (meta_checksum)")
    if not isinstance(meta.get("backend"), str):
        raise _damaged(path, "has no 'backend' entry naming the framework that wrote the checkpoint")
    return meta


def load_meta(folder: Path) -> dict[str, Any]:
    """``folder``'s ``meta.json``, parsed and checked (:func:`check_meta`); :class:`CheckpointError`
    when it is missing, is no JSON or is damaged."""
    path = folder / META_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CheckpointError(
            f"{str(folder)!r} is not a fastcore_train checkpoint (it has no {META_FILE}); it may be damaged or "
            "written by another tool. Pick a complete checkpoint folder.") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{str(path)!r} cannot be read ({error}); pick another checkpoint.") from error
    try:
        meta = json.loads(text)
    except ValueError as error:
        raise CheckpointError(f"{str(path)!r} is damaged ({error}); pick another checkpoint.") from error
    return check_meta(path, meta)
