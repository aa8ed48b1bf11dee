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


def test_demo_on_a_device_this_machine_lacks_is_one_line_and_exit_2(harness):
    """No traceback: a GPU index no machine here has is a fact of the setup, said in one line."""
    completed = subprocess.run(
        [sys.executable, "-m", "fastcore_train", "demo", "--driver", harness.driver_name, "--device", "cuda:99",
         "--epochs", "1"], capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr, completed.stderr[-3000:]
    errors = [line for line in completed.stderr.splitlines() if line.startswith("python -m fastcore_train demo:")]
    assert len(errors) == 1 and "device='cuda:99'" in errors[0] and "pass device='cpu'" in errors[0], \
        completed.stderr[-3000:]
