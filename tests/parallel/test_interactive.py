"""No self-launch from an interactive interpreter; notebook_launcher's argument checks.

A multi-device ``device=`` re-runs the command line once per rank: a Jupyter kernel, IPython or
the Python prompt cannot be re-run, so the launcher is refused in one line naming
``notebook_launcher`` before anything starts (the notebook case itself runs in a real kernel in
``tests/distributed/test_notebook.py``).
"""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from fastcore_train.parallel.environment import RankFacts
from fastcore_train.parallel.interactive import interactive_interpreter
from fastcore_train.parallel.launcher import choose_launcher
from fastcore_train.parallel.placement import Placement

ROOT = Path(__file__).resolve().parents[2]
TWO_RANKS = Placement(RankFacts(rank=0, local_rank=0, world_size=2, launcher="self-launched"), "cpu", launch=True,
                      devices=["cpu", "cpu"])


class ZMQInteractiveShell:
    """Named as ipykernel's shell, which ``get_ipython()`` returns in a Jupyter kernel."""


def test_a_script_is_not_interactive(monkeypatch):
    assert interactive_interpreter() is None  # pytest: a command that can be re-run
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    assert interactive_interpreter() is None  # imported (jupyter_client does), but no kernel runs here


@pytest.mark.parametrize("setup, kind", [
    (lambda mp: mp.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=ZMQInteractiveShell)),
     "a Jupyter kernel"),
    (lambda mp: mp.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: object())), "IPython"),
    (lambda mp: mp.setattr(sys, "ps1", ">>> ", raising=False), "the Python prompt"),
])
def test_interactive_interpreters_are_told_and_refused_in_one_line(monkeypatch, setup, kind):
    setup(monkeypatch)
    assert interactive_interpreter() == kind
    with pytest.raises(RuntimeError) as refused:
        choose_launcher(TWO_RANKS, "spawn", [{}, {}])
    message = str(refused.value)
    assert "\n" not in message and kind in message and "notebook_launcher(function, args, num_processes=2)" in message


def test_an_ipython_without_a_shell_is_no_interactive_interpreter(monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: None))
    assert interactive_interpreter() is None


def test_notebook_launcher_argument_errors(monkeypatch):
    from fastcore_train import notebook_launcher

    with pytest.raises(TypeError, match="unknown option"):
        notebook_launcher(print, num_processes=2, driver="torch", mixed_precision="fp16")
    with pytest.raises(ValueError, match="Unknown driver"):
        notebook_launcher(print, num_processes=2, driver="tensorflow")
    for framework in ("torch", "paddle"):
        monkeypatch.setitem(sys.modules, framework, types.ModuleType(framework))
    with pytest.raises(ValueError, match="several frameworks are imported; pass driver="):
        notebook_launcher(print, num_processes=2)


def test_one_process_runs_here(harness):
    from fastcore_train import launch

    assert launch(lambda a, b: (a, b), (1, "x"), num_processes=1, driver=harness.driver_name) == (1, "x")
    with pytest.raises(ValueError, match="positive number of ranks"):
        launch(print, num_processes=0, driver=harness.driver_name)


PROMPT = """
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.harnesses.{name} import Harness
from fastcore_train import Trainer
h = Harness(); model = h.make_model(initial_weights()); x, y = make_data(8)
try:
    Trainer(model=model, train_dataloader=h.make_dataloader(x, y, 4), optimizers=h.make_sgd(model, 0.1), device=["cpu", "cpu"])
except RuntimeError as error:
    print("REFUSED:", error)

print("ALIVE")
"""


def test_a_multi_device_trainer_at_the_python_prompt_is_refused_and_the_prompt_lives_on(harness, tmp_path):
    done = subprocess.run([sys.executable, "-i", "-q"], input=PROMPT.format(name=harness.driver_name), text=True,
                          capture_output=True, cwd=ROOT, timeout=300)
    assert "REFUSED: device= asks for 2 ranks, but this process is the Python prompt" in done.stdout, done.stderr[-3000:]
    assert "notebook_launcher" in done.stdout and "ALIVE" in done.stdout, done.stderr[-3000:]
