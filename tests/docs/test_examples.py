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
from typing import Optional

import pytest

from tests.docs import examples
from tests.docs.forkserver import ForkServer, framework_to_preload
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
            pytest.param(chain, id=chain.id, marks=[] if chain.env == "core" else
                         [pytest.mark.needs_backend] + ([pytest.mark.distributed] if chain.env.endswith("-dist") else []))
            for chain in chains if chain.env in wanted and not chain.kernel])
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


def example_environment() -> dict[str, str]:
    # One thread per process: the examples are tiny, and CI machines are small and shared.
    return {"OMP_NUM_THREADS": "1", **os.environ, "MPLBACKEND": "Agg",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(examples.ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.fixture(scope="session")
def fork_server(request: pytest.FixtureRequest):
    """The session's docs fork server for its env's framework (None where examples run as scripts)."""
    modules = framework_to_preload(request.config.getoption("--backend"))
    if modules is None:
        yield None
        return
    server = ForkServer(modules, example_environment())
    yield server
    server.close()


def run_chain(chain: examples.Chain, folder: Path, server: Optional[ForkServer] = None,
              extra_env: Optional[dict[str, str]] = None) -> tuple[int, str]:
    """Run ``chain`` as ``folder/example.py`` in a fresh process: forked from ``server`` (its framework
    imported) when given, else a new interpreter; its exit code and output, tracebacks pointing at the
    page. Examples of a -dist env start their ranks from their own command line: always a new interpreter."""
    script, origin = chain.script()
    path = folder / "example.py"
    path.write_text(script, encoding="utf-8")
    if server is not None and not chain.env.endswith("-dist"):
        returncode, stdout, stderr = server.run(path, TIMEOUT_S)
    else:
        process = run_process_tree([sys.executable, path.name], TIMEOUT_S, env={**example_environment(), **(extra_env or {})},
                                   cwd=str(folder))
        returncode, stdout, stderr = process.returncode, process.stdout, process.stderr
    return returncode, examples.relabel_traceback(stdout + stderr, path, origin)


def test_example_runs(chain: examples.Chain, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    extra_env = {}
    if chain.ray:  # join the session's cluster instead of starting one
        extra_env["RAY_ADDRESS"] = request.getfixturevalue("ray_cluster").get_runtime_context().gcs_address
    # (the fork server starts with the first example that needs it: none in a -dist half)
    server = None if chain.env.endswith("-dist") else request.getfixturevalue("fork_server")
    returncode, output = run_chain(chain, tmp_path, server, extra_env)
    if returncode != 0:
        pages = ", ".join(block.where for block in chain.blocks)
        pytest.fail(f"the docs example at {pages} ({chain.env}) exited with {returncode}:\n{output[-6000:]}")


def test_a_failing_block_is_reported_at_its_page_line(tmp_path: Path, fork_server: Optional[ForkServer]) -> None:
    """As a script, and forked from the env's fork server (the core env has one: fastcore_train imported)."""
    page = tmp_path / "page.md"
    page.write_text("<!-- example: core -->\n```python\nvalue = 1\n```\n\n"
                    "<!-- example: core, continue -->\n```python\nimport sys\nassert value == 1\n"
                    "print('out', sys.argv[0].endswith('example.py'))\nraise ValueError('boom')\n```\n")
    blocks = [examples.classify(block) for block in examples.read_blocks(page)]
    (chain,) = examples.chains(blocks)
    for server in (None, fork_server):
        returncode, output = run_chain(chain, tmp_path, server)
        assert returncode == 1 and f'File "{page}", line 11' in output and "ValueError: boom" in output, output
        assert "out True" in output, output


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
