"""The demo (the README's first command) reaches the promised accuracy with this backend."""
from __future__ import annotations

import re
import subprocess
import sys


def test_demo_reaches_95_percent_and_writes_a_checkpoint(harness, tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "fastcore_train", "demo", "--driver", harness.driver_name,
         "--output", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    final = re.search(r"Final evaluation: acc#acc#test=([0-9.]+)", completed.stdout)
    assert final, completed.stdout[-3000:]
    assert float(final.group(1)) >= 0.95
    assert "Epoch 20/20" in completed.stdout  # plain progress lines when stdout is not a terminal
    assert (tmp_path / "out" / "checkpoint" / "meta.json").is_file()


def test_demo_help_lists_the_options():
    completed = subprocess.run([sys.executable, "-m", "fastcore_train", "demo", "--help"],
                               capture_output=True, text=True, check=True)
    for option in ("--driver", "--device", "--epochs"):
        assert option in completed.stdout
