"""A model summary: each submodule's parameters, trainable and frozen, and the model's size.

``summarize(model)`` reads the model's own module tree through its backend's ``modules`` part
(``backends/<name>/modules.py``), so it works for a torch, paddle, jittor or oneflow model alike
and imports nothing else. The Trainer logs it (rank 0) when ``run()`` starts, unless built with
``model_summary=False``. A parameter shared by several submodules is counted once in the totals.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from fastcore_train.drivers.registry import backend_part

__all__ = ["ModelSummary", "SummaryRow", "summarize"]


@dataclass(frozen=True)
class SummaryRow:
    """One submodule: its dotted name, class, and the parameters under it."""

    name: str
    kind: str
    params: int
    trainable: int
    depth: int


@dataclass
class ModelSummary:
    """The rows (submodules down to ``max_depth``) and the whole model's totals."""

    model_kind: str
    rows: list[SummaryRow] = field(default_factory=list)
    total_params: int = 0
    trainable_params: int = 0
    total_bytes: int = 0

    @property
    def frozen_params(self) -> int:
        return self.total_params - self.trainable_params

    @property
    def size_mb(self) -> float:
        """The parameters' size in megabytes (10**6 bytes)."""
        return self.total_bytes / 1e6

    def __str__(self) -> str:
        header = ("", "Name", "Type", "Params", "Trainable")
        lines = [(str(i), "  " * (row.depth - 1) + row.name, row.kind, _count(row.params), _count(row.trainable))
                 for i, row in enumerate(self.rows)]
        widths = [max(len(line[c]) for line in [header, *lines]) for c in range(len(header))]
        fmt = "  ".join(f"{{:{'>' if c in (0, 3, 4) else '<'}{w}}}" for c, w in enumerate(widths))
        table = [fmt.format(*header), *(fmt.format(*line) for line in lines)]
        table.append("-" * len(table[0]))
        table.append(f"{_count(self.trainable_params)} trainable, {_count(self.frozen_params)} frozen, "
                     f"{_count(self.total_params)} total parameters ({self.size_mb:.3f} MB), in a {self.model_kind}")
        return "\n".join(table)


def _count(number: int) -> str:
    for unit, size in (("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if number >= size:
            return f"{number / size:.1f} {unit}"
    return str(number)


def named_children(module: Any) -> list[tuple[str, Any]]:
    """A module's direct submodules with their names: every framework here spells it
    ``named_children()``, so a backend's ``modules`` part defines it only to differ."""
    return list(module.named_children())


def torch_style_parameter_facts(module: Any, numel: Optional[Callable[[Any], int]] = None
                                ) -> list[tuple[int, int, bool, int]]:
    """``(identity, values, trainable, bytes)`` per parameter, for frameworks whose parameters
    answer ``numel()``, ``requires_grad`` and ``element_size()`` as torch's do (torch, oneflow);
    ``numel`` replaces ``p.numel()`` where a backend's parameters may be placeholders."""
    count = numel or (lambda p: p.numel())
    return [(id(p), count(p), bool(p.requires_grad), count(p) * p.element_size()) for p in module.parameters()]


def summarize(model: Any, max_depth: int = 1) -> ModelSummary:
    """The summary of ``model`` (a module of any registered framework), rows down to ``max_depth``
    levels of submodules (1: the direct children)."""
    if not isinstance(max_depth, int) or max_depth < 0:
        raise ValueError(f"max_depth must be an int >= 0, got {max_depth!r}.")
    modules = backend_part(model, "modules")
    children = getattr(modules, "named_children", named_children)
    summary = ModelSummary(model_kind=type(model).__name__)
    seen: set[int] = set()
    for identity, numel, trainable, nbytes in modules.parameter_facts(model):
        if identity not in seen:
            seen.add(identity)
            summary.total_params += numel
            summary.trainable_params += numel if trainable else 0
            summary.total_bytes += nbytes

    def visit(module: Any, prefix: str, depth: int) -> None:
        if depth > max_depth:
            return
        for name, child in children(module):
            facts = {identity: (numel, trainable) for identity, numel, trainable, _ in modules.parameter_facts(child)}
            summary.rows.append(SummaryRow(
                name=f"{prefix}{name}", kind=type(child).__name__, depth=depth,
                params=sum(numel for numel, _ in facts.values()),
                trainable=sum(numel for numel, trainable in facts.values() if trainable)))
            visit(child, f"{prefix}{name}.", depth + 1)

    visit(model, "", 1)
    return summary
