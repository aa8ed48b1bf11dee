"""The documentation site builds with ``mkdocs build --strict`` and without a single warning.

Needs the ``docs`` extra (mkdocs, mkdocstrings[python]); without it these tests are skipped,
unless ``FASTCORE_TRAIN_REQUIRE_DOCS=1`` (set by ``tox -e docs``) makes a missing tool a failure,
so CI cannot pass by building nothing. The API reference is read statically (griffe), so no
framework is needed.
"""
from __future__ import annotations

import ast
import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIRE_ENV = "FASTCORE_TRAIN_REQUIRE_DOCS"
TOOLS = ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python")


def _missing_tools() -> list[str]:
    missing = []
    for name in TOOLS:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(name)
    return missing


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Build the site once into a temporary folder; return it and the build's output."""
    missing = _missing_tools()
    if missing:
        message = (f"the docs tools are not installed ({', '.join(missing)} missing): "
                   'pip install -e ".[docs]" -c constraints.txt, or run python -m tox -e docs')
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {message}")
        pytest.skip(message)
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed (exit {result.returncode}):\n{output}"
    return site_dir, output


def _page_text(path: Path) -> str:
    """The visible text of a built page's main content, whitespace collapsed."""
    page = path.read_text(encoding="utf-8")
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _plain(docstring_part: str) -> str:
    """Docstring markup as it reads once rendered: no backticks, no reST roles."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", docstring_part)
    return " ".join(text.replace("`", "").split())


def test_strict_build_has_no_warnings(site: tuple[Path, str]) -> None:
    _, output = site
    flagged = [line for line in output.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not flagged, "the docs build reported:\n" + "\n".join(flagged)


def test_every_page_is_built(site: tuple[Path, str]) -> None:
    site_dir, _ = site
    docs = ROOT / "docs"
    for source in docs.rglob("*.md"):
        relative = source.relative_to(docs).with_suffix("")
        built = site_dir / ("index.html" if relative.name == "index" and relative.parent == Path(".") else
                            relative.parent / ("" if relative.name == "index" else relative.name) / "index.html")
        assert built.is_file(), f"{source.relative_to(ROOT)} was not built (expected {built})"


def test_reference_shows_the_trainer_docstring(site: tuple[Path, str]) -> None:
    site_dir, _ = site
    tree = ast.parse((ROOT / "fastcore_train" / "controllers" / "trainer.py").read_text(encoding="utf-8"))
    trainer = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Trainer")
    docstring = ast.get_docstring(trainer)
    assert docstring, "Trainer has no docstring"
    first_paragraph = _plain(docstring.split("\n\n")[0])
    page = _page_text(site_dir / "reference" / "trainer" / "index.html")
    assert first_paragraph in page, f"the Trainer reference page lacks its docstring: {first_paragraph!r}"
    for name in ("run", "save_checkpoint", "load_checkpoint", "TrainerState"):
        assert name in page, f"the Trainer reference page does not document {name}"
