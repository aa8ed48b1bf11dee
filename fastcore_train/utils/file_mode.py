"""The mode a new file gets from ``open()`` under this process's umask (0644 under umask 022), for
files written by a library that creates them otherwise (safetensors writes 0600)."""
from __future__ import annotations

import os
import threading

_lock = threading.Lock()


def umask() -> int:
    """This process's umask, read without changing it where Linux says it (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _lock:  # elsewhere: set and put back (other threads creating files meanwhile are rare)
        current = os.umask(0o022)
        os.umask(current)
    return current


def new_file_mode() -> int:
    """The permission bits ``open(path, "w")`` gives a new file here."""
    return 0o666 & ~umask()
