"""One clear message for a bad config: which key, where in which file, and what was wrong.

jsonargparse reports errors with the key's dotted name; :func:`locate` finds the line of that key
in the YAML files given with ``--config`` (the last file that sets it wins, as when parsing), so
the message points at the line to fix.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence


class ConfigError(Exception):
    """A config (file or command line) that cannot be used; ``str()`` is the message to show."""

    def __init__(self, message: str, key: Optional[str] = None, where: Optional[str] = None) -> None:
        self.key = key
        self.where = where
        prefix = ""
        if key:
            prefix = f"{where}: key {key!r}: " if where else f"key {key!r}: "
        super().__init__(prefix + message)


def _node_for(node: object, parts: Sequence[str]) -> Optional[object]:
    import yaml
    for part in parts:
        if isinstance(node, yaml.MappingNode):
            found = [value for key, value in node.value if getattr(key, "value", None) == part]
            if not found:
                return None
            node = found[-1]
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
        else:
            return None
    return node


def _key_node(node: object, parts: Sequence[str]) -> Optional[object]:
    """The node of the key itself (its line is where the key is written)."""
    import yaml
    parent = _node_for(node, parts[:-1])
    if isinstance(parent, yaml.MappingNode):
        for key, _ in reversed(parent.value):
            if getattr(key, "value", None) == parts[-1]:
                return key
    return None


def locate(key: str, config_files: Sequence[Path]) -> Optional[str]:
    """``"run.yaml line 7"`` for the last of ``config_files`` that sets ``key``; the nearest enclosing
    key's line when the file has only part of the path; None when no file has it."""
    import yaml
    parts = key.split(".")
    for path in reversed(list(config_files)):
        try:
            root = yaml.compose(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        for depth in range(len(parts), 0, -1):
            found = _key_node(root, parts[:depth])
            if found is not None:
                return f"{path} line {found.start_mark.line + 1}"
    return None


_KEY_PATTERNS = (
    r'Parser key "([^"]+)"',
    r"Key '([^']+)'",
    r'Key "([^"]+)"',
    r"key '([^']+)'",
    r"Unrecognized arguments: --?([\w.]+)",
    r"required: --?([\w.]+)",
)


def key_in_message(message: str) -> Optional[str]:
    """The dotted key a jsonargparse error message is about, if it names one."""
    for pattern in _KEY_PATTERNS:
        match = re.search(pattern, message)
        if match:
            return match.group(1).lstrip("-")
    return None


def from_parser_error(error: BaseException, config_files: Sequence[Path]) -> ConfigError:
    """A :class:`ConfigError` from a jsonargparse error, with the key's file and line."""
    message = str(error).strip()
    key = key_in_message(message)
    if key is not None and message.startswith(f'Parser key "{key}":'):
        message = message[len(f'Parser key "{key}":'):].strip()
    message = re.sub(r"\n\s*", " ", message)
    return ConfigError(message, key, locate(key, config_files) if key else None)
