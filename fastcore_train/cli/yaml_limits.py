"""Config files are read within limits: their size, the values their aliases expand to, and their depth.

YAML aliases (``&a`` ... ``*a``) let a small file stand for a huge one: nine lines of nine aliases
each expand to 9^9 values, which a loader builds until memory runs out. Before any loader sees a
``--config`` file, its node graph is composed (aliases stay shared there, so this takes the file's
own size in memory) and the values it would expand to are counted; a file over a limit is refused
in one line naming it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fastcore_train.cli.errors import ConfigError

#: A config file of more bytes than this is refused (configs are a few KB).
MAX_BYTES = 10 * 1024 * 1024
#: The values (scalars, lists, mappings) a file may expand to, aliases expanded.
MAX_VALUES = 1_000_000
#: How deeply lists and mappings may nest.
MAX_DEPTH = 64


def _refuse(path: Path, what: str) -> ConfigError:
    return ConfigError(f"{path}: {what}; config files are read within limits ({MAX_BYTES // (1024 * 1024)} MB, "
                       f"{MAX_VALUES:,} values with aliases expanded, {MAX_DEPTH} levels of nesting), so it was not "
                       "read. Write the values out without chains of aliases, or split the file.")


def check_yaml_limits(text: str, path: Path) -> None:
    """Raise :class:`ConfigError` naming ``path`` when ``text`` (its content) is over a limit; a
    file that is no valid YAML passes (the loader says what is wrong with it)."""
    import yaml

    if len(text.encode("utf-8")) > MAX_BYTES:
        raise _refuse(path, f"the file has {len(text.encode('utf-8')):,} bytes")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise _refuse(path, "its lists or mappings nest too deeply") from None
    except yaml.YAMLError:
        return
    if root is None:
        return
    sizes: dict[int, int] = {}  # node id -> values it expands to
    depths: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            depths[key] = 1 + max((depths[id(child)] for child in children), default=0)
            if sizes[key] > MAX_VALUES:
                raise _refuse(path, f"its aliases expand it to more than {MAX_VALUES:,} values (an alias bomb?)")
            if depths[key] > MAX_DEPTH:
                raise _refuse(path, f"its lists or mappings nest more than {MAX_DEPTH} levels deep")
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _refuse(path, "an alias refers to a value that contains it (a recursive alias)")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
