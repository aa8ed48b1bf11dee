"""Telling an interactive interpreter (a Jupyter kernel, IPython, the Python prompt) from a script.

A self-launch re-runs this process's command line once per rank. That is right for
``python train.py`` and wrong for an interpreter a person types into: a Jupyter kernel re-run as
``python -m ipykernel_launcher -f kernel.json`` fights the kernel for its sockets and takes it
down, and the Python prompt re-run waits for input. Those must start their ranks with
:func:`fastcore_train.notebook_launcher` instead; nothing here imports a framework.
"""
from __future__ import annotations

from fastcore_train.utils.interpreter import interactive_interpreter

__all__ = ["interactive_interpreter", "refuse_self_launch"]


def refuse_self_launch(world_size: int) -> None:
    """Raise a one-line error when this interpreter cannot be re-run as the other ranks."""
    kind = interactive_interpreter()
    if kind is not None:
        raise RuntimeError(
            f"device= asks for {world_size} ranks, but this process is {kind} and cannot be re-run as the other "
            "ranks: put the training in a function and run it with fastcore_train.notebook_launcher(function, "
            f"args, num_processes={world_size}) (device=None inside), or run a script.")
