"""Small modules with one job each: no module of the package is over 400 lines (split along its seams
instead, as controllers/trainer.py and checkpoint/layout.py were)."""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fastcore_train"
LIMIT = 400


def test_no_module_is_over_400_lines():
    over = {str(path.relative_to(PACKAGE)): count for path in PACKAGE.rglob("*.py")
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert not over, f"modules over {LIMIT} lines (split them along their seams): {over}"
