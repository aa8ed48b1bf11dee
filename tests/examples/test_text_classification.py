"""examples/text_classification/train.py on this env's backend: a few batches train (the loss falls),
loss.csv and metrics.json are written, and the losses are those of the committed 4-epoch run of the
same recipe (examples/text_classification/runs), which the docs' picture was drawn from."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from examples.text_classification import train

BATCHES = 32
RUNS = Path(train.__file__).resolve().parent / "runs"
# Same arithmetic up to rounding: the frameworks' kernels round differently, and 32 Adam steps carry
# it along; the committed runs differ from each other by less than this over these batches.
TOLERANCE = 1e-3


def _losses(path: Path) -> np.ndarray:
    with open(path, encoding="utf-8") as file:
        return np.array([float(row["loss"]) for row in csv.DictReader(file)])


def test_train_script_learns_and_writes_its_curve(backend_name: str, tmp_path: Path) -> None:
    metrics = train.main(["--driver", backend_name, "--n-batches", str(BATCHES), "--out", str(tmp_path)])
    losses = _losses(tmp_path / "loss.csv")
    assert len(losses) == BATCHES == metrics["batches"]
    # fallen by 15% from the first 8 batches, and clearly below chance (ln 4 = 1.386 for 4 classes)
    falls = losses[-8:].mean() < min(0.85 * losses[:8].mean(), np.log(4) - 0.2)
    assert falls, f"the loss did not fall: {losses.round(3).tolist()}"
    written = json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))
    assert written["driver"] == backend_name and 0.0 <= written["test_accuracy"] <= 1.0
    assert backend_name in written["versions"]
    for framework in (backend_name, "torch"):  # the same curve as this backend's committed run, and torch's
        committed = _losses(RUNS / framework / "loss.csv")[:BATCHES]
        difference = np.abs(losses - committed).max()
        assert difference < TOLERANCE, (f"{backend_name}'s losses differ from the committed {framework} run by "
                                        f"{difference:.2e} (tolerance {TOLERANCE})")
