"""The command line (``fastcore-train`` / ``python -m fastcore_train``): usage lines name the command
as it was run, and the demo's setup errors are one line with the fix and exit status 2."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from fastcore_train.drivers.registry import all_backends

SCRIPT = Path(sys.executable).with_name("fastcore-train")  # the console script of the installed package


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300)


def test_python_dash_m_names_itself_in_usage_and_errors():
    shown = run(sys.executable, "-m", "fastcore_train", "demo", "--help")
    assert shown.returncode == 0 and shown.stdout.startswith("usage: python -m fastcore_train demo ")
    wrong = run(sys.executable, "-m", "fastcore_train", "demo", "--epochs", "many")
    assert wrong.returncode == 2 and "python -m fastcore_train demo: error: argument --epochs" in wrong.stderr


@pytest.mark.skipif(not SCRIPT.exists(), reason=f"the package is not installed with its console script ({SCRIPT})")
def test_the_console_script_names_itself():
    shown = run(SCRIPT, "--help")
    assert shown.returncode == 0 and shown.stdout.startswith("usage: fastcore-train ")
    unknown = run(SCRIPT, "demo", "--driver", "no_such_driver")
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines() == ["fastcore-train demo: error: unknown driver 'no_such_driver'; pass one of "
                                           "torch, fairscale, torch_fsdp, deepspeed, torch_model_parallel, paddle, paddle_model_parallel, jittor, oneflow."]


def test_an_unknown_driver_is_one_line_listing_the_drivers():
    done = run(sys.executable, "-m", "fastcore_train", "demo", "--driver", "tensorflow")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["python -m fastcore_train demo: error: unknown driver 'tensorflow'; pass one "
                                        "of torch, fairscale, torch_fsdp, deepspeed, torch_model_parallel, paddle, paddle_model_parallel, jittor, oneflow."]


MISSING = [entry for entry in all_backends() if importlib.util.find_spec(entry.framework_module) is None]


@pytest.mark.skipif(not MISSING, reason="every backend's framework is installed here (the core env has none)")
def test_a_framework_that_is_not_installed_is_one_line_with_its_install_command():
    entry = MISSING[0]
    done = run(sys.executable, "-m", "fastcore_train", "demo", "--driver", entry.driver_names[0], "--epochs", "1")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"python -m fastcore_train demo: error: The {entry.name!r} backend needs the {entry.framework_module!r} "
        f"package, which is not installed. Install it with: {entry.install_hint}"]
