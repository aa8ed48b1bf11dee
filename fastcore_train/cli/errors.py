"""One clear message for a bad config: which key, where in which file, and what was wrong.

jsonargparse reports errors with the key's dotted name; :func:`locate` finds the line of that key
in the YAML files given with ``--config`` (the last file that sets it wins, as when parsing), so
the message points at the line to fix.
"""
from __future__ import annotations

import difflib
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
    r"Group '([^']+)' does not accept (?:option|nested key) '([^']+)'",
    r'Parser key "([^"]+)"',
    r"Key '([^']+)'",
    r'Key "([^"]+)"',
    r"key '([^']+)'",
    r"(?i)unrecognized arguments: --?([\w.]+)",
    r"required: --?([\w.]+)",
)


def key_in_message(message: str) -> Optional[str]:
    """The dotted key a jsonargparse error message is about, if it names one."""
    for pattern in _KEY_PATTERNS:
        match = re.search(pattern, message)
        if match:
            return ".".join(match.groups()).lstrip("-")
    return None


def on_command_line(key: str, argv: Sequence[str]) -> bool:
    """Whether ``argv`` sets ``key`` (``--key value`` or ``--key=value``)."""
    return any(arg == f"--{key}" or arg.startswith(f"--{key}=") for arg in argv)


def from_parser_error(error: BaseException, config_files: Sequence[Path], argv: Sequence[str] = (),
                      known_keys: Sequence[str] = ()) -> ConfigError:
    """A :class:`ConfigError` from a jsonargparse error: the key, its file and line (or "command
    line" when the command line set it), and for an unknown key the closest known ones."""
    message = re.sub(r"\n\s*", " ", str(error).strip())
    key = key_in_message(message)
    if key is None:
        return ConfigError(message)
    message = message.replace(f'Parser key "{key}": ', "")
    if key not in known_keys and known_keys:
        close = difflib.get_close_matches(key, known_keys, n=3)
        if close:
            message += f". Did you mean {' or '.join(close)}?"
    where = "command line" if on_command_line(key, argv) else locate(key, config_files)
    return ConfigError(message, key, where)
