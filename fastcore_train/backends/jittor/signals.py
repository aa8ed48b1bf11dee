"""Undoing the signal handlers ``import jittor`` installs process-wide.

Jittor's C++ core handles SIGCHLD by ending the whole process (``quick_exit(1)``) whenever any
child process dies of a signal other than SIGTERM (meant to report its dataset workers running
out of memory), and SIGINT likewise, without a ``KeyboardInterrupt``. A training process that
starts and stops other programs, or that a user interrupts, must keep Python's behaviour: this
restores the default SIGCHLD disposition and Python's SIGINT handler.
"""
from __future__ import annotations

import signal
import threading


def restore_python_signal_handling() -> None:
    """Give SIGCHLD and SIGINT back to Python (only possible from the main thread; else a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if hasattr(signal, "SIGCHLD"):
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
