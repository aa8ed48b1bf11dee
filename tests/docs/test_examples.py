"""Every python block of README.md and docs/ is marked, and runs in the tox env its marker names.

The core env (no ``--backend``) runs the ``core`` blocks; ``--backend NAME`` runs NAME's blocks,
and its ``-dist`` blocks under ``-m distributed``. See :mod:`tests.docs.examples` for the markers.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.docs import examples
from tests.processes import run_process_tree

TIMEOUT_S = 600
_RAW_FENCE = re.compile(r"^\s*(```+|~~~+)\s*(python3?|py)\b", re.I)


def _classified() -> tuple[list[examples.Block], list[str], list[examples.Chain]]:
    blocks, errors = [], []
    for block in examples.all_blocks():
        try:
            blocks.append(examples.classify(block))
        except examples.MarkerError as error:
            errors.append(str(error))
    try:
        chains = list(examples.chains(blocks))
    except examples.MarkerError as error:
        errors.append(str(error))
        chains = []
    return blocks, errors, chains


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    blocks, errors, chains = _classified()
    if "chain" in metafunc.fixturenames:
        backend = metafunc.config.getoption("--backend")
        wanted = {"core"} if backend is None else {backend, f"{backend}-dist"}
        metafunc.parametrize("chain", [
            pytest.param(chain, id=chain.id, marks=[pytest.mark.distributed] if chain.env.endswith("-dist") else [])
            for chain in chains if chain.env in wanted])
    if "signature_block" in metafunc.fixturenames:
        metafunc.parametrize("signature_block", [block for block in blocks if block.kind == "signature"],
                             ids=lambda block: block.where)


def test_every_block_is_marked() -> None:
    """Each page's python blocks, counted by plain fence matching, are all found and classified."""
    blocks, errors, chains = _classified()
    assert not errors, "docs code blocks need markers:\n" + "\n".join(errors)
    found = Counter(block.page for block in blocks)
    for page in examples.pages():
        fences = sum(1 for line in page.read_text(encoding="utf-8").split("\n") if _RAW_FENCE.match(line))
        assert found[page] == fences, f"{page}: {fences} python fences but {found[page]} blocks collected"
    envs = Counter(chain.env for chain in chains)
    for env in ("core",) + examples.BACKENDS:
        assert envs[env] > 0, f"no docs example runs in the {env} env: {dict(envs)}"


def test_a_block_without_marker_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n```python\nprint(1)\n```\n\n<!-- example: skip: not shown -->\n```python\nx\n```\n")
    first, second = examples.read_blocks(page)
    with pytest.raises(examples.MarkerError, match="without a marker"):
        examples.classify(first)
    with pytest.raises(examples.MarkerError, match="must also be in the page's text"):
        examples.classify(second)


def run_chain(chain: examples.Chain, folder: Path) -> tuple[int, str]:
    """Run ``chain`` as ``folder/example.py`` in a fresh interpreter; its exit code and output,
    tracebacks pointing at the page."""
    script, origin = chain.script()
    path = folder / "example.py"
    path.write_text(script, encoding="utf-8")
    # One thread per process: the examples are tiny, and CI machines are small and shared.
    env = {"OMP_NUM_THREADS": "1", **os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(examples.ROOT), os.environ.get("PYTHONPATH")]))}
    process = run_process_tree([sys.executable, path.name], TIMEOUT_S, env=env, cwd=str(folder))
    return process.returncode, examples.relabel_traceback(process.stdout + process.stderr, path, origin)


def test_example_runs(chain: examples.Chain, tmp_path: Path) -> None:
    returncode, output = run_chain(chain, tmp_path)
    if returncode != 0:
        pages = ", ".join(block.where for block in chain.blocks)
        pytest.fail(f"the docs example at {pages} ({chain.env}) exited with {returncode}:\n{output[-6000:]}")


def test_a_failing_block_is_reported_at_its_page_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- example: core -->\n```python\nvalue = 1\n```\n\n"
                    "<!-- example: core, continue -->\n```python\nassert value == 1\nraise ValueError('boom')\n```\n")
    blocks = [examples.classify(block) for block in examples.read_blocks(page)]
    (chain,) = examples.chains(blocks)
    returncode, output = run_chain(chain, tmp_path)
    assert returncode == 1 and f'File "{page}", line 9' in output and "ValueError: boom" in output


def _resolve(dotted: str):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            target = getattr(target, name)
        return target
    raise ImportError(dotted)


def test_signature_matches(signature_block: examples.Block) -> None:
    """A signature shown as a call lists the real parameters, in order, with the real defaults."""
    target = _resolve(signature_block.argument)
    call = ast.parse(signature_block.code).body[0].value
    assert isinstance(call, ast.Call), f"{signature_block.where}: not a call"
    shown: list[tuple[str, object]] = [(arg.id, inspect.Parameter.empty) for arg in call.args]
    for keyword in call.keywords:
        if keyword.arg is None:
            shown.append((f"**{keyword.value.id}", inspect.Parameter.empty))
        else:
            shown.append((keyword.arg, ast.literal_eval(keyword.value)))
    real = []
    for parameter in inspect.signature(target).parameters.values():
        if parameter.name == "self":
            continue
        prefix = {inspect.Parameter.VAR_KEYWORD: "**", inspect.Parameter.VAR_POSITIONAL: "*"}.get(parameter.kind, "")
        real.append((prefix + parameter.name, parameter.default))
    assert [name for name, _ in shown] == [name for name, _ in real], \
        f"{signature_block.where}: the page shows {[n for n, _ in shown]}, {signature_block.argument} takes {[n for n, _ in real]}"
    for (name, documented), (_, default) in zip(shown, real):
        assert documented == default, f"{signature_block.where}: {name} defaults to {default!r}, the page says {documented!r}"


def test_a_wrong_signature_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- example: signature: fastcore_train.Evaluator -->\n```python\n"
                    "Evaluator(model, dataloaders, metrics=None, driver='auto', device='cuda')\n```\n")
    (block,) = [examples.classify(block) for block in examples.read_blocks(page)]
    with pytest.raises(AssertionError, match="the page shows"):
        test_signature_matches(block)
