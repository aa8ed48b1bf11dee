"""Data parallel from a real Jupyter kernel, run headless (nbclient + ipykernel) on every backend.

``notebooks/two_ranks.ipynb`` trains in one process, makes a rank of a 2-rank
``notebook_launcher`` job raise (the cell shows the rank's error), types a multi-device Trainer
into a cell (refused in one line), then launches the 2 ranks again from the same kernel (each
rank trains half the batches, the weights end equal), runs docs/notebooks.md's example for the
backend as one more cell (its ``kernel`` docs blocks: the tutorial's flow, in a real kernel) and
checks that no rank is left over: the kernel must live through all of it. One notebook run per
backend covers every check.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from tests.docs import examples  # noqa: E402

pytestmark = pytest.mark.distributed

NOTEBOOK = Path(__file__).parent / "notebooks" / "two_ranks.ipynb"
ROOT = Path(__file__).resolve().parents[2]


def _text(cell, name: Optional[str] = None) -> str:
    """What the cell printed (``name``: "stdout" or "stderr" only)."""
    return "".join(output.get("text", "") for output in cell.outputs
                   if output.get("output_type") == "stream" and name in (None, output.get("name")))


def _error(cell):
    return next((output for output in cell.outputs if output.get("output_type") == "error"), None)


def test_two_ranks_from_a_notebook_kernel_lives_on(backend_name: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(f"BACKEND = {backend_name!r}\nOUT = {str(tmp_path)!r}"))
    docs = examples.kernel_chains(backend_name)
    assert docs, f"docs/notebooks.md has no {backend_name}-dist block marked kernel"
    for chain in docs:  # after the checks, before the last cell (no rank left behind)
        cell = nbformat.v4.new_code_cell(chain.script()[0])
        cell.metadata["docs"] = chain.id
        notebook.cells.insert(len(notebook.cells) - 1, cell)
    # the kernel is this interpreter, finding this checkout first (as the ranks it starts will)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=240, allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    raising = [cell for cell in cells if "raises" in cell.metadata.get("tags", [])]
    for cell in cells:
        if cell not in raising:
            where = f"the docs example at {cell.metadata['docs']}" if "docs" in cell.metadata else "cell"
            assert _error(cell) is None, f"{where} failed:\n{cell.source}\n{_error(cell) and _error(cell)['traceback']}"
    output = "".join(_text(cell) for cell in cells)
    for check in ("HALF_THE_BATCHES", "EQUAL_WEIGHTS", "KERNEL_ALIVE"):
        assert check in output, output[-3000:]
    failed_rank, refused = (_error(cell) for cell in raising)
    assert failed_rank is not None and failed_rank["ename"] == "RankFailedError", failed_rank
    assert failed_rank["evalue"].startswith("rank 1 failed: ValueError: boom from rank 1"), failed_rank["evalue"]
    # the clear error is the first thing the cell shows: no rank's traceback printed before it
    failing_cell = raising[0]
    assert "Traceback" not in _text(failing_cell) and "boom" not in _text(failing_cell), _text(failing_cell)
    # the model summary (rank 0's INFO lines, and the kernel's own) is stdout, not Jupyter's red stderr
    assert "Model summary" in "".join(_text(cell, "stdout") for cell in cells), output[-3000:]
    assert "Model summary" not in "".join(_text(cell, "stderr") for cell in cells)
    assert refused is not None and refused["ename"] == "RuntimeError", refused
    assert "notebook_launcher" in refused["evalue"] and "Jupyter kernel" in refused["evalue"], refused["evalue"]
    timings = [line for line in output.splitlines() if "SECONDS=" in line]
    print(f"{backend_name}: {'; '.join(timings)}; a failing rank shows: {failed_rank['evalue'].splitlines()[0]}",
          file=sys.stderr)
