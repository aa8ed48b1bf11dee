"""Checking the options a backend takes through its own keyword (``torch_kwargs``, ...).

Written once so every backend rejects a misspelt option the same way: a TypeError naming the
unknown keys and the accepted ones, instead of an option silently ignored.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional


def check_backend_options(keyword: str, given: Optional[dict[str, Any]], accepted: Iterable[str]) -> dict[str, Any]:
    """A copy of ``given`` (``None`` is ``{}``); keys outside ``accepted`` are a TypeError."""
    options = dict(given or {})
    accepted = set(accepted)
    unknown = set(options) - accepted
    if unknown:
        raise TypeError(f"Unknown {keyword} {sorted(unknown)}; accepted: {sorted(accepted)}.")
    return options
