"""A checkpoint's ``meta.json`` edited on purpose by tests: rewritten consistently (its file list and
its own checksum made to match, as a tool that knows the format would), or made to look as an older
format wrote it (without the keys later formats added)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastcore_train.checkpoint import ALGORITHM_KEY, FILES_KEY, META_CHECKSUM_KEY, META_FILE, meta_digest


def read_meta(folder: Path) -> dict[str, Any]:
    return json.loads((Path(folder) / META_FILE).read_text())


def rewrite_meta(folder: Path, meta: dict[str, Any]) -> None:
    """Write ``meta`` with its file list and its seal matching what it now says (format 5 on)."""
    meta = dict(meta)
    if isinstance(meta.get("checksums"), dict) and FILES_KEY in meta:
        meta[FILES_KEY] = sorted(meta["checksums"])
    if META_CHECKSUM_KEY in meta:
        meta[META_CHECKSUM_KEY] = meta_digest(meta)
    (Path(folder) / META_FILE).write_text(json.dumps(meta))


def older_format(meta: dict[str, Any], version: int) -> dict[str, Any]:
    """``meta`` as format ``version`` wrote it: no seal and no file list before 5, no algorithm
    (sha256) and no checksums requirement before 4."""
    meta = {key: value for key, value in meta.items() if key not in (META_CHECKSUM_KEY, FILES_KEY)}
    if version < 4:
        meta.pop(ALGORITHM_KEY, None)
    meta["format_version"] = version
    return meta


def reseal(folder: Path, meta: dict[str, Any]) -> None:
    """Write ``meta`` as it is, with only its own checksum made to match (its file list untouched)."""
    (Path(folder) / META_FILE).write_text(json.dumps(dict(meta, **{META_CHECKSUM_KEY: meta_digest(meta)})))
