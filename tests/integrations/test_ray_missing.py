"""Without Ray, importing the Ray integration says how to install it (no Ray needed to run this)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_ray_integration_without_ray_says_how_to_install_it():
    code = "import sys; sys.modules['ray'] = None; import fastcore_train.integrations.ray"  # as if not installed
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    assert done.returncode != 0
    assert "ImportError: fastcore_train.integrations.ray needs Ray Train" in done.stderr, done.stderr[-2000:]
    assert 'pip install "fastcore-train[ray]"' in done.stderr


@pytest.mark.also_per_backend  # proves something only where Ray is installed (the backend envs)
def test_importing_the_package_loads_no_engine():
    code = "import sys, fastcore_train, fastcore_train.integrations; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]
