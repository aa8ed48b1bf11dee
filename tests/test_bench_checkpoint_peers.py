"""``bench/checkpoint.py`` and ``bench/peers.py`` run: one small round each (smoke tests of the
machinery; speed is read from the benches' output, never asserted here)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_bench(*argv: str) -> str:
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_checkpoint_bench_runs_one_round_on_a_small_model(backend_name, tmp_path):
    out = run_bench(str(ROOT / "bench" / "checkpoint.py"), "--backend", backend_name, "--rounds", "1",
                    "--features", "16", "--hidden", "32", "--dir", str(tmp_path), "--profile")
    assert f"fastcore_train checkpoint cost ({backend_name})" in out
    for line in ("raw (framework save)", "save_checkpoint (blocking)", "save_checkpoint(blocking=False)", "load_checkpoint",
                 "world size 4: rank 0", "sync save / raw save (blocked): median", "async stall / raw save (blocked): median",
                 "load_checkpoint / raw load: median", "raw + fsync / raw save: median",
                 "cProfile of one save_checkpoint", "cProfile of one load_checkpoint"):
        assert line in out, out
    assert list(tmp_path.iterdir()) == [], "the bench removes what it wrote"


def test_peers_bench_runs_and_the_race_is_fair(backend_name):
    if backend_name != "torch":
        pytest.skip("bench/peers.py compares torch trainers")
    # The MLP and bench/models.py's three workloads (the CNN's dropout included: every run starts from
    # the same torch seed); the peers run too where they are installed (tox -e bench), else are skipped.
    out = run_bench(str(ROOT / "bench" / "peers.py"), "--model", "small", "cnn", "transformer", "loader",
                    "--rounds", "1", "--batches", "2", "--warmup", "0")
    assert "trainer" in out and "hand-again" in out
    for label in ("small 64-256-256-10", "cnn (2 batches of 64, 0 workers)", "transformer (2 batches of 32, 0 workers)",
                  "loader (2 batches of 32, 2 workers)"):
        assert f"bit-identical weights for every contender ({label}): yes" in out, out
