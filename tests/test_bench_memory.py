"""``bench/memory.py`` runs (a smoke test of its machinery on a tiny model; the memory figures are
read from its output, never asserted here): one process and a meta-built FSDP2,
each step's loss equal to one process's."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_memory_bench_runs_a_tiny_model_and_the_sharded_losses_match(backend_name):
    if backend_name != "torch":
        pytest.skip("bench/memory.py measures torch's sharded drivers")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "memory.py"), "--width", "64", "--steps", "2",
                           "--only", "single", "fsdp2_meta"],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "# 8 x Linear(64, 64): 0.0 M parameters" in out, out
    rows = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    for label in ("1 process", "2-rank FSDP2, meta build"):
        assert label in rows, out
        assert rows[label].endswith("| yes |"), f"{label}: losses differ from one process's\n{out}"
    # a 64-wide model is all runtime: the floor says the goal is out of reach, and the sharded row misses it
    assert "no 2-way sharding can reach the target at this width" in out, out
    assert "2-rank FSDP2, meta build: " in out and out.rstrip().endswith("MISS"), out
