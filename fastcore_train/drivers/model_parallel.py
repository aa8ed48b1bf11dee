"""What every tensor-parallel driver checks and computes the same way, whatever the framework:
its options, the ``(dp, tp)`` mesh shape, which data shard a rank reads, and the plan's module
names (``*`` wildcards) and style names. Used by torch's ``driver="torch_model_parallel"`` and
paddle's ``driver="paddle_model_parallel"``."""
from __future__ import annotations

import fnmatch
from typing import Any, Callable, Iterable, Mapping, Optional, TypeVar

Style = TypeVar("Style")


def check_options(keyword: str, options: Optional[Mapping[str, Any]], accepted: Iterable[str]) -> dict[str, Any]:
    """A copy of ``options`` (None is ``{}``); a key outside ``accepted`` is a ValueError naming both."""
    given = dict(options or {})
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        raise ValueError(f"{keyword} does not take {', '.join(unknown)}; it takes {', '.join(accepted)}.")
    return given


def mesh_shape(world_size: int, tp_size: Any) -> tuple[int, int]:
    """``(dp_size, tp_size)``: ``tp_size`` ranks per tensor-parallel group, ``world_size / tp_size`` groups."""
    tp = int(tp_size)
    if tp < 1 or world_size % tp:
        raise ValueError(f"tp_size={tp} must divide the world size {world_size} (dp_size = world_size / tp_size).")
    return world_size // tp, tp


def data_shard(rank: int, tp_size: int, dp_size: int) -> tuple[int, int]:
    """``(dp_size, dp_rank)``: the ranks of a tensor-parallel group (consecutive ranks) read the same batches."""
    return dp_size, rank // tp_size


def match_plan(module_names: Iterable[str], plan: Mapping[str, Any], styles: Mapping[str, Callable[[], Style]],
               model_name: str, is_style: Callable[[Any], bool] = lambda style: False,
               style_hint: str = "") -> dict[str, Style]:
    """The plan with each style name made a style (``styles[name]()``; a value ``is_style`` accepts
    is kept as it is). Every name (``*`` matches any part of a name) must match a module of the model."""
    names = [name for name in module_names if name]
    resolved: dict[str, Style] = {}
    for pattern, style in plan.items():
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
            raise ValueError(f"tp_plan names {pattern!r}, which matches no module of {model_name} "
                             f"(its modules: {', '.join(names) or 'none'}).")
        if is_style(style):
            resolved[pattern] = style
        elif isinstance(style, str) and style in styles:
            resolved[pattern] = styles[style]()
        else:
            raise ValueError(f"tp_plan[{pattern!r}] is {style!r}; use one of {', '.join(styles)}{style_hint}.")
    return resolved


def modules_of(module_names: Iterable[str], plan: Mapping[str, Style]) -> dict[str, Style]:
    """Each module name the plan matches, with the style of its first matching entry."""
    found: dict[str, Style] = {}
    for name in module_names:
        for pattern, style in plan.items():
            if name and fnmatch.fnmatchcase(name, pattern):
                found[name] = style
                break
    return found
