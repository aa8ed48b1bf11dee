"""Telling an interactive interpreter (a Jupyter kernel, IPython, the Python prompt) from a script.

Low in the package (the log reads it to send a notebook's INFO lines to stdout; the launchers to
refuse re-running an interpreter as ranks, :mod:`fastcore_train.parallel.interactive`); nothing
here imports a framework.
"""
from __future__ import annotations

import sys
from typing import Optional


def interactive_interpreter() -> Optional[str]:
    """What kind of interactive interpreter this process is ("a Jupyter kernel", "IPython", "the
    Python prompt", "a script read from standard input"), or None for a command that can be re-run."""
    # A running shell, not an imported module: jupyter_client imports ipykernel in any process
    # that looks kernels up (a test running notebooks), which is no kernel itself.
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    if shell is not None:
        return "a Jupyter kernel" if type(shell).__name__ == "ZMQInteractiveShell" else "IPython"
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return "the Python prompt"
    if sys.argv[:1] in ([""], ["-"]) or not sys.argv:
        return "the Python prompt" if sys.argv[:1] != ["-"] else "a script read from standard input"
    return None
