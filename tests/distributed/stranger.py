"""A stranger on this machine connecting to a job's ports (issue 39), for tests/distributed/test_stranger.py.

To every port the job listens on, :func:`poke` sends random bytes and hangs up. :func:`well_formed` then
speaks the protocol a port may serve, as a client of the framework would: on torch and paddle a real client
of the framework's TCP store (``torch.distributed.TCPStore`` / paddle's ``core.TCPStore``) that writes a
key and adds to a counter of its own; on oneflow an HTTP/2 connection preface and SETTINGS frame (the
opening of a gRPC conversation: its control ports speak gRPC); on jittor (mpirun's channel speaks PRRTE's
own framing) random bytes only. A store client on a port that is not a store (gloo's listener, say) is
answered by nobody, and torch's client waits for the answer without a time limit (its timeout covers the
connection only): each request runs in a daemon thread, and what has not answered when the test looks is
``"no answer"``. Those threads end when the job does (its sockets close).
"""
from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable, Optional

HOST = "127.0.0.1"
#: The start of an HTTP/2 conversation (RFC 9113 3.4): the client preface, then an empty SETTINGS frame.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def poke(port: int, payload: Optional[bytes] = None) -> str:
    """Connect to ``port`` on this machine, send ``payload`` (512 random bytes by default), hang up; what happened."""
    try:
        with socket.create_connection((HOST, port), timeout=2) as connection:
            connection.sendall(os.urandom(512) if payload is None else payload)
        return "sent"
    except OSError as error:
        return f"{type(error).__name__}: {error}"


def _torch_store(port: int) -> str:
    import torch.distributed as dist

    client = dist.TCPStore(HOST, port, None, False, timedelta(seconds=3), wait_for_workers=False)
    client.set(f"stranger/{uuid.uuid4().hex}", "was here")
    client.add("stranger/count", 1)
    return "store answered: key written"


def _paddle_store(port: int) -> str:
    from paddle.base import core

    client = core.TCPStore(HOST, port, False, 1, 3)
    client.set(f"stranger/{uuid.uuid4().hex}", "was here")
    client.add("stranger/count", 1)
    return "store answered: key written"


def _http2(port: int) -> str:
    with socket.create_connection((HOST, port), timeout=2) as connection:
        connection.sendall(HTTP2_PREFACE)
        connection.settimeout(2)
        try:
            answer = connection.recv(64)
        except socket.timeout:
            return "no answer"
    return f"answered {len(answer)} bytes" + (" (an HTTP/2 SETTINGS frame)" if answer[3:4] == b"\x04" else "")


#: Per backend: the well-formed request a stranger can make to one of the job's ports, if any.
REQUESTS: dict[str, Callable[[int], str]] = {"torch": _torch_store, "paddle": _paddle_store, "oneflow": _http2}


@dataclass
class Stranger:
    """Pokes every port it is given and makes the backend's well-formed request to it (in a thread), keeping
    what happened per phase: ``pokes[phase]`` and ``requests[phase]`` map a port to its outcome."""

    backend: str
    pokes: dict[str, dict[int, str]] = field(default_factory=dict)
    requests: dict[str, dict[int, str]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # port -> the socket, as listening.py writes it
    _threads: list[threading.Thread] = field(default_factory=list)

    def visit(self, phase: str, port: int, name: str = "") -> None:
        self.names.setdefault(port, name)
        self.pokes.setdefault(phase, {})[port] = poke(port)
        request = REQUESTS.get(self.backend)
        if request is None:
            return
        outcomes = self.requests.setdefault(phase, {})
        outcomes[port] = "no answer"

        def run() -> None:
            try:
                outcomes[port] = request(port)
            except Exception as error:  # refused, reset, not a store: all a stranger can expect
                outcomes[port] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"

        thread = threading.Thread(target=run, name=f"stranger-{phase}-{port}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def settle(self, timeout: float = 5) -> None:
        """Give the requests still running up to ``timeout`` seconds in all to end (those left: "no answer")."""
        import time

        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def answered(self, phase: str) -> list[int]:
        """The ports whose well-formed request was answered as the protocol answers a client, in ``phase``."""
        return [port for port, outcome in self.requests.get(phase, {}).items()
                if outcome.startswith(("store answered", "answered"))]

    def report(self) -> str:
        return "\n".join([f"{phase}: random bytes {self.pokes.get(phase)}; well-formed {self.requests.get(phase)}"
                          for phase in self.pokes] + [f"  {port}: {name}" for port, name in sorted(self.names.items())])
