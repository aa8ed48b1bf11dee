"""``fastcore-train fit`` self-launches data-parallel ranks from ``--trainer.device [cpu,cpu]``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "digits.yaml"


@pytest.mark.distributed
def test_fit_self_launches_two_cpu_ranks(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "fastcore_train", "fit", "--config", str(EXAMPLE), "--trainer.device", "[cpu,cpu]",
         "--trainer.n_epochs", "1", "--trainer.progress_bar", "raw", "--output_dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "batch 23/23" in completed.stdout  # 1437 rows / 32 per batch, split over 2 ranks
    assert (tmp_path / "out" / "checkpoint" / "meta.json").is_file()
    assert yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())["trainer"]["device"] == ["cpu", "cpu"]
