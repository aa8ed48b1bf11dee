"""The resolved config ``fit`` writes to ``<output_dir>/config.yaml``, and only ever over its own.

The file starts with a comment holding the SHA-256 of the rest, so ``fit`` can tell a file it
wrote (and nobody edited since) from anything else at that path: the user's own ``--config``
file kept in the output folder, or a copy of ours edited by hand. Only the first is replaced;
for anything else :func:`config_target_problem` says why, before anything is trained.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Optional, Sequence

CONFIG_NAME = "config.yaml"
_HEADER = ("# Resolved by fastcore-train fit (sha256 {digest} of the lines below). The next fit with this "
           "output_dir rewrites it: edit a copy.\n")
_HEADER_PATTERN = re.compile(r"# Resolved by fastcore-train fit \(sha256 ([0-9a-f]{64}) of the lines below\)")


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def render(body: str) -> str:
    """The file's text: our header, then the resolved config ``body``."""
    return _HEADER.format(digest=_digest(body)) + body


def written_by_fit(path: Path) -> bool:
    """Whether ``path`` is a resolved config written by ``fit`` and unchanged since."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    header, newline, body = text.partition("\n")
    match = _HEADER_PATTERN.match(header)
    return bool(newline) and match is not None and match.group(1) == _digest(body)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def config_target_problem(target: Path, inputs: Sequence[Path]) -> Optional[str]:
    """Why ``fit`` must not write its resolved config to ``target``, or None when it may.

    It may when nothing is there or when a config written by ``fit`` (unchanged) is there.
    ``inputs`` are the ``--config`` files, named in the message when ``target`` is one of them.
    """
    if not os.path.lexists(target):
        return None
    if target.is_file() and not target.is_symlink() and written_by_fit(target):
        return None
    given = next((path for path in inputs if _same_file(path, target)), None)
    if given is not None:
        what = f"is your --config file {str(given)!r}"
    elif target.is_dir():
        what = "is a folder"
    else:
        what = "is a file fit did not write (or one it wrote, edited since)"
    return (f"fit writes the resolved config to {str(target)!r}, which {what}; fit never replaces a file "
            "it did not write, so nothing was trained. Pass another --output_dir (or move that file).")


def write_config(target: Path, body: str) -> None:
    """Write ``render(body)`` to ``target`` whole: a temporary beside it, then renamed over it."""
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    temporary.write_text(render(body), encoding="utf-8")
    os.replace(temporary, target)
