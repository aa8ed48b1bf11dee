"""``bench/gpu/check.py``'s logic on CPU, as CI can run it (``--device cpu --quick``): every check
runs and passes, the measurements are printed. The figures that count come from a GPU
(bench/gpu/run.sh); speed is never asserted here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_check_runs_every_check_on_cpu(backend_name, tmp_path):
    if backend_name != "torch":
        pytest.skip("the GPU check is torch's (the GPU machine has torch only)")
    out = tmp_path / "results.md"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu" / "check.py"), "--device", "cpu", "--quick",
                           "--out", str(out)], capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1] for line in out.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| check")}
    expected = {"train", "fp16", "bf16", "resume after a kill", "async checkpoint", "speed: mlp", "speed: cnn",
                "speed: transformer", "peers: accelerate", "peers: lightning", "reads"}
    assert set(rows) == expected, rows
    failed = {check: result for check, result in rows.items() if result not in ("ok", "measured", "skipped")}
    assert not failed, out.read_text()
    for check in ("train", "fp16", "bf16", "resume after a kill", "async checkpoint"):
        assert rows[check] == "ok", out.read_text()
    assert "bit-identical" in out.read_text()
