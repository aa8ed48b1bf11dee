"""``bench/overhead.py`` and ``bench/models.py`` run on the selected backend: one round of a few batches,
fair races (bit-identical weights where the framework allows), the verdict lines.

A smoke test of the benchmark's machinery, not a timing: speed is read from the bench's output,
never asserted here.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


# The Trainer reseeds jittor before every step and oneflow after every backward of a model with dropout
# (exact resume), so only torch and paddle draw the hand loop's dropout masks.
DROPOUT_BIT_IDENTICAL = {"torch": True, "paddle": True, "jittor": False, "oneflow": False}


def test_models_bench_runs_every_model_and_the_races_are_fair(backend_name):
    # 2 batches: oneflow's reseed follows a backward, so a 1-batch epoch would draw the hand loop's masks
    # anyway; jittor reseeds before the first step already, and its CNN takes ~9 s a batch on CPU.
    batches = "1" if backend_name == "jittor" else "2"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "models.py"), "--backend", backend_name, "--model", "all",
         "--rounds", "1", "--batches", batches, "--warmup", "0"],
        capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert f"fastcore_train on real models ({backend_name})" in out
    for model in ("cnn", "transformer", "loader"):
        assert f"[{model}] trainer/hand (median of 1 rounds):" in out, out
        assert f"[{model}] A/A control hand-again/hand (median of 1 rounds):" in out, out
    hand_loader, trainer_loader = out.split("[loader] hand loader:")[1].split("\n")[0].split("Trainer's loader:")
    assert "workers 2)" in hand_loader, out
    assert "workers 2)" in trainer_loader, out  # the workers survive the Trainer's rebuild of the loader
    for model in ("transformer", "loader"):  # no dropout: the same arithmetic on every backend
        assert f"[{model}] bit-identical weights (trainer vs hand): yes" in out, out
    if DROPOUT_BIT_IDENTICAL[backend_name]:
        assert "[cnn] bit-identical weights (trainer vs hand): yes" in out, out
    else:
        assert "[cnn] bit-identical weights (trainer vs hand): NO (trainer differ" in out, out
        assert "[cnn] bit-identical weights with dropout off (trainer vs hand): yes" in out, out


def test_jittor_workers_bench_runs_one_round_with_the_same_weights(backend_name):
    """bench/jittor_workers.py: the Trainer's loader workers against jittor's own and against none."""
    if backend_name != "jittor":
        pytest.skip("loader workers of a jittor Dataset: jittor only")
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "jittor_workers.py"), "--backend", "jittor", "--rounds", "1",
         "--batches", "2", "--warmup", "0"], capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trainer/hand with 2 workers:" in done.stdout, done.stdout
    assert "Trainer's weights with workers and without: identical" in done.stdout, done.stdout
