"""The package's parts import each other one way only, in the layer order docs/architecture.md
draws: a module may import its own part and the parts of lower layers, never a higher layer or
another part of its own layer (so the backends never import each other). Every import counts,
at module level or inside a function; loading by module path (the driver registry finding a
backend, ``report_to`` finding a tracker callback) is not an import and is how the lower
layers reach the higher ones.

An AST check of our own (no dependency): import-linter would express the same contract, but it
needs a configuration file and the package installed in the env that runs it, and the core env's
check must run with no framework; this reads the source alone.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fastcore_train"
BACKENDS = ["backends.torch", "backends.paddle", "backends.jittor", "backends.oneflow"]
#: Lowest first. A part is a subpackage, a module at the package root, or one backend.
LAYERS: list[list[str]] = [
    ["version"],
    ["utils"],
    ["log"],
    ["events", "samplers", "data", "config"],
    ["parallel"],
    ["drivers"],
    ["metrics", "summary", "seeding"],
    ["checkpoint"],
    ["convert"],
    ["backends", *BACKENDS],
    ["controllers"],
    ["callbacks"],
    ["compat"],
    ["cli", "integrations"],
    ["demo"],
    ["__init__", "__main__"],
]
LAYER_OF = {part: index for index, parts in enumerate(LAYERS) for part in parts}
#: At most this many modules at the root beside __init__.py, __main__.py and version.py.
ROOT_MODULES_ALLOWED = 3


def part_of(module: str) -> str:
    """``fastcore_train.a.b`` -> ``a`` (``backends.torch`` for a backend; the root's own modules by name)."""
    names = module.split(".")[1:]
    if not names:
        return "__init__"
    if names[0] == "backends" and len(names) > 1:
        return f"backends.{names[1]}"
    return names[0]


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    names = list(relative.parts)
    if names[-1] == "__init__" and len(names) > 1:
        names = names[:-1]
    return ".".join(names)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import of the package in ``path``, wherever it stands."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("fastcore_train")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("fastcore_train"):
            if node.module == "fastcore_train":  # from fastcore_train import checkpoint (a part) or Trainer (the root)
                for alias in node.names:
                    is_part = (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file()
                    found.append((node.lineno, f"fastcore_train.{alias.name}" if is_part else "fastcore_train"))
            else:
                found.append((node.lineno, node.module))
    return found


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        source_part = part_of(source) if "." in source else "__init__"
        for line, target in imported_modules(path):
            target_part = part_of(target)
            if target_part == source_part or (source_part.startswith("backends.") and target_part == "backends"):
                continue
            if source_part not in LAYER_OF or target_part not in LAYER_OF:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: part {source_part!r} or {target_part!r} "
                             "is in no layer: add it to LAYERS here and to docs/architecture.md")
            elif LAYER_OF[target_part] >= LAYER_OF[source_part]:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {source_part} (layer {LAYER_OF[source_part]}) "
                             f"imports {target} ({target_part}, layer {LAYER_OF[target_part]})")
    return found


def test_every_import_runs_down_the_layers():
    assert violations() == []


def test_every_part_has_a_layer():
    parts = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    parts |= {p.stem for p in PACKAGE.glob("*.py")}
    parts |= {f"backends.{p.name}" for p in (PACKAGE / "backends").iterdir() if (p / "__init__.py").is_file()}
    assert sorted(parts - set(LAYER_OF)) == []


def test_the_root_holds_few_modules():
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py", "version.py"))
    assert len(modules) <= ROOT_MODULES_ALLOWED, modules


@pytest.mark.parametrize("source, target", [("controllers", "callbacks"), ("backends.torch", "backends.paddle"),
                                            ("log", "drivers"), ("drivers", "demo")])
def test_the_check_catches_an_upward_import(tmp_path, monkeypatch, source, target):
    """The check itself can fail: an import planted against the order is reported."""
    package = tmp_path / "fastcore_train"
    folder = package.joinpath(*source.split("."))
    folder.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (folder / "__init__.py").write_text(f"from fastcore_train.{target} import something\n")
    monkeypatch.setitem(globals(), "PACKAGE", package)
    found = violations()
    assert len(found) == 1 and f"imports fastcore_train.{target}" in found[0], found


@pytest.mark.parametrize("old, new", sorted(__import__("fastcore_train.utils.moved_modules",
                                                       fromlist=["MOVED"]).MOVED.items()))
def test_a_moved_modules_old_path_still_imports_with_a_future_warning(old, new):
    import importlib
    import sys

    sys.modules.pop(old, None)
    with pytest.warns(FutureWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_the_integrations_import_no_backend():
    """Engines' integrations reach a backend only through the registry's table, never by import."""
    found = [(path.name, target) for path in sorted((PACKAGE / "integrations").rglob("*.py"))
             for _, target in imported_modules(path) if part_of(target).startswith("backends")]
    assert found == []
