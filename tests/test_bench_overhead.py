"""``bench/overhead.py`` runs on the selected backend: one round of a few batches, fair race, RSS line.

A smoke test of the benchmark's machinery, not a timing: speed is read from the bench's output,
never asserted here.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_overhead_bench_runs_one_round_and_the_race_is_fair(backend_name):
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "overhead.py"), "--backend", backend_name, "--rounds", "1",
         "--batches", "4", "--warmup", "0", "--import-runs", "1", "--rss-runs", "1", "--rss-epochs", "1"],
        capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert f"fastcore_train overhead ({backend_name})" in out
    # Same data, loader kind, initial weights and steps: the Trainer must end bit-identical to the hand loop.
    assert "bit-identical weights (trainer vs hand): yes" in out, out
    assert "peak RSS ratio trainer/hand:" in out and "overhead ratio (median of 1 rounds):" in out
    assert "frameworks loaded: none -> OK" in out
