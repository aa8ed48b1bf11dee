"""``import fastcore_train`` loads no framework (its import time is measured in bench/overhead.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest

# Only where a framework is installed can importing the package import it: every env runs these.
pytestmark = pytest.mark.also_per_backend

FRAMEWORKS = ("torch", "paddle", "jittor", "oneflow", "numpy")


def test_import_loads_no_framework():
    code = ("import sys, fastcore_train; "
            f"print(','.join(m for m in {FRAMEWORKS!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""


def test_public_names_resolve_lazily_without_a_framework():
    code = ("import sys, fastcore_train as f; f.Trainer, f.Evaluator, f.Event, f.Callback, f.Accuracy, f.Metric; "
            "print(','.join(m for m in ('torch', 'paddle', 'jittor', 'oneflow') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""
