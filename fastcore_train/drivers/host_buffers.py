"""Host memory an asynchronous checkpoint's snapshot copies into, reused from one save to the next.

A snapshot copies the whole training state to host memory. Allocating that afresh at every save
costs more than the copy itself (the memory must be faulted in, and on some machines handed back
by the host first), so each backend keeps the buffers of its last snapshot and the next snapshot
copies into those whose key (the backend's: position or name, shape, dtype) matches. That is
safe because one checkpoint write is in flight at a time: the previous write is over before the
next snapshot begins. Written once here; a backend supplies only the key and the copy.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Hashable, Iterator


class BufferRound:
    """One snapshot's use of a :class:`HostBuffers`: :meth:`take` a buffer per tensor."""

    def __init__(self, spare: dict[Hashable, Any]) -> None:
        self._spare = spare
        #: the buffers this snapshot took, by key: what the next snapshot may reuse
        self.taken: dict[Hashable, Any] = {}

    def take(self, key: Hashable, allocate: Callable[[], Any]) -> tuple[Any, bool]:
        """The previous snapshot's buffer for ``key``, or ``allocate()``; and whether it is new
        (a new buffer may already hold the values, a reused one must be copied into)."""
        buffer = self._spare.pop(key, None)
        new = buffer is None
        if new:
            buffer = allocate()
        self.taken[key] = buffer
        return buffer, new


class HostBuffers:
    """The host buffers of a backend's last snapshot, kept for the next one (see the module docstring)."""

    def __init__(self) -> None:
        self._spare: dict[Hashable, Any] = {}

    @contextmanager
    def reuse(self) -> Iterator[BufferRound]:
        """A snapshot's round; when it ends, the buffers it took are the ones kept (others are freed)."""
        current = BufferRound(self._spare)
        yield current
        self._spare = current.taken
