"""``bench/ddp.py`` runs on the selected backend with 2 real ranks: the framework's own hand-written
data-parallel loop and the Trainer on ``device=["cpu", "cpu"]``, a few steps of a tiny MLP.

A smoke test of the benchmark's machinery (launching each framework's ranks its own way, timing,
the ratio line, the fair-race check), not a timing: speed is read from the bench's output, never
asserted here.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.distributed.launchers import job_environment
from tests.processes import run_process_tree

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[2]


def test_ddp_bench_runs_hand_and_trainer_on_two_ranks_and_the_race_is_fair(backend_name):
    done = run_process_tree(
        [sys.executable, str(ROOT / "bench" / "ddp.py"), "--backend", backend_name, "--ddp-only", "--repeats", "1",
         "--steps", "2", "--warmup", "1", "--sizes", "16,32,10", "--batch-size", "8", "--timeout", "240"],
        timeout=300, env=job_environment(), cwd=str(ROOT))
    out = done.stdout
    assert done.returncode == 0, done.stderr[-3000:]
    assert "errors:" not in out, out
    assert f"fastcore_train data parallel ({backend_name})" in out
    # Both 2-rank configurations ran and were timed.
    for label in ("hand DDP", "trainer DDP (self-launch)"):
        assert re.search(rf"^  {re.escape(label)} +2 ", out, re.MULTILINE), out
    assert re.search(r"^ratio trainer DDP / hand DDP \(step time\): \d+\.\d{3}  target <= 1\.03  (PASS|MISS)$",
                     out, re.MULTILINE), out
    # Same data split, initial weights and steps: both ranks of both loops end bit-identical.
    assert "same final weights, hand DDP vs trainer DDP: bit-identical" in out, out
