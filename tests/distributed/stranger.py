"""A stranger connecting to a job's ports (issue 39), for tests/distributed/test_stranger.py and
tests/distributed/test_stranger_two_hosts.py.

To every port the job listens on, :func:`poke` sends random bytes and hangs up. Then the stranger speaks the
protocols a port may serve, as a client of the framework would: on torch and paddle a real client of the
framework's TCP store (``torch.distributed.TCPStore`` / paddle's ``core.TCPStore``) that writes a key and adds
to a counter of its own; on paddle also an HTTP PUT of a key of its own (the protocol of paddle's launcher
meeting point across nodes, ``--master``: an HTTP key-value server); on oneflow an HTTP/2 connection preface
and SETTINGS frame (the opening of a gRPC conversation: its control ports speak gRPC); on jittor (mpirun's
channel speaks PRRTE's own framing) random bytes only. A store client on a port that is not a store (gloo's
listener, say) is answered by nobody, and torch's client waits for the answer without a time limit (its
timeout covers the connection only): each port's requests run in a daemon thread, one after the other, and
the stranger gives up a request with no answer after ``GIVE_UP_SECONDS`` (it shuts its connection down, as a
client with a timeout closes it); what has not answered when the test looks is ``"no answer"``.

On another host the stranger is a process of its own in that host's network namespace
(:class:`StrangerProcess`, running this file as a script: ``python stranger.py BACKEND``, one
``PHASE ADDRESS PORT NAME`` line per visit on its standard input, ``settle SECONDS`` to wait for the
requests, ``hold ADDRESS PORT SECONDS`` to keep a connection open, sending nothing, until ``leave``; at the
end of its input it prints what happened as JSON).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable, Optional

HOST = "127.0.0.1"
#: A stranger's request still waiting for an answer after this long is given up: its connection is closed,
#: as a client with a timeout closes it (a connection held open for good is another visit: a stall, not a request).
GIVE_UP_SECONDS = 5.0
#: The start of an HTTP/2 conversation (RFC 9113 3.4): the client preface, then an empty SETTINGS frame.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def poke(address: str, port: int, payload: Optional[bytes] = None) -> str:
    """Connect to ``address:port``, send ``payload`` (512 random bytes by default), hang up; what happened."""
    try:
        with socket.create_connection((address, port), timeout=2) as connection:
            connection.sendall(os.urandom(512) if payload is None else payload)
        return "sent"
    except OSError as error:
        return f"{type(error).__name__}: {error}"


def _torch_store(address: str, port: int) -> str:
    import torch.distributed as dist

    client = dist.TCPStore(address, port, None, False, timedelta(seconds=3), wait_for_workers=False)
    client.set(f"stranger/{uuid.uuid4().hex}", "was here")
    client.add("stranger/count", 1)
    return "store answered: key written"


def _paddle_store(address: str, port: int) -> str:
    from paddle.base import core

    client = core.TCPStore(address, port, False, 1, 3)
    client.set(f"stranger/{uuid.uuid4().hex}", "was here")
    client.add("stranger/count", 1)
    return "store answered: key written"


def _http_put(address: str, port: int) -> str:
    """PUT a key of the stranger's own, as a node puts its own to paddle's launcher meeting point."""
    body = b"was here"
    request = (f"PUT /stranger/{uuid.uuid4().hex} HTTP/1.1\r\nHost: {address}:{port}\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    answer = _ask(address, port, request)
    if answer is None:
        return "no answer"
    status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    return f"answered {status!r}" if answer.startswith(b"HTTP/") else f"not HTTP: {answer[:16]!r}"


def _ask(address: str, port: int, request: bytes) -> bytes | None:
    """The first bytes answered to ``request`` on a fresh connection, or None if none came within
    ``GIVE_UP_SECONDS`` (the connection is then closed, as a client with a timeout would)."""
    with socket.create_connection((address, port), timeout=2) as connection:
        connection.sendall(request)
        connection.settimeout(GIVE_UP_SECONDS)
        try:
            return connection.recv(64)
        except socket.timeout:
            return None


def _http2(address: str, port: int) -> str:
    answer = _ask(address, port, HTTP2_PREFACE)
    if answer is None:
        return "no answer"
    return f"answered {len(answer)} bytes" + (" (an HTTP/2 SETTINGS frame)" if answer[3:4] == b"\x04" else "")


#: Per backend: the well-formed requests (name -> request) a stranger can make to one of the job's ports.
REQUESTS: dict[str, dict[str, Callable[[str, int], str]]] = {
    "torch": {"store": _torch_store},
    "paddle": {"store": _paddle_store, "http": _http_put},
    "oneflow": {"http2": _http2},
}


def hang_up(address: str, port: int) -> None:
    """Shut down every connection this process still holds to ``address:port`` (a framework's client blocked on
    an answer that never comes gets end-of-file, and the server sees the stranger leave)."""
    from tests.distributed.listening import connected_sockets

    for fd in connected_sockets(os.getpid(), address, port):
        try:
            connection = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            connection.close()  # the duplicate only: the client closes its own


@dataclass
class Stranger:
    """Pokes every port it is given and makes the backend's well-formed requests to it (each in a thread),
    keeping what happened per phase: ``pokes[phase]`` maps ``"address:port"`` to its outcome,
    ``requests[phase]`` maps ``"<request> address:port"`` to its outcome."""

    backend: str
    pokes: dict[str, dict[str, str]] = field(default_factory=dict)
    requests: dict[str, dict[str, str]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # "address:port" -> the socket, as listening.py writes it
    _threads: list[threading.Thread] = field(default_factory=list)

    def visit(self, phase: str, port: int, name: str = "", address: str = HOST) -> None:
        target = f"{address}:{port}"
        self.names.setdefault(target, name)
        self.pokes.setdefault(phase, {})[target] = poke(address, port)
        outcomes = self.requests.setdefault(phase, {})
        requests = REQUESTS.get(self.backend, {})
        for kind in requests:
            outcomes[f"{kind} {target}"] = "no answer"

        def run() -> None:  # one request after the other, each given up after GIVE_UP_SECONDS
            for kind, request in requests.items():
                giving_up = threading.Timer(GIVE_UP_SECONDS, hang_up, (address, port))
                giving_up.daemon = True
                giving_up.start()
                try:
                    outcomes[f"{kind} {target}"] = request(address, port)
                except Exception as error:  # refused, reset, not a store: all a stranger can expect
                    outcomes[f"{kind} {target}"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
                finally:
                    giving_up.cancel()

        thread = threading.Thread(target=run, name=f"stranger-{phase}-{target}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def settle(self, timeout: float = 5) -> None:
        """Give the requests still running up to ``timeout`` seconds in all to end (those left: "no answer")."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """The stranger leaves (its requests are settled): nothing to do for one in this process."""
        self.settle()

    def answered(self, phase: str, kind: str = "") -> list[str]:
        """The ports whose well-formed request (of ``kind``, or any) was answered as the protocol answers a
        client, in ``phase``."""
        return [key for key, outcome in self.requests.get(phase, {}).items()
                if key.startswith(kind) and outcome.startswith(("store answered", "answered"))]

    def reached(self, phase: str) -> list[str]:
        """The ports the random bytes reached in ``phase``."""
        return [target for target, outcome in self.pokes.get(phase, {}).items() if outcome == "sent"]

    def report(self) -> str:
        return "\n".join([f"{phase}: random bytes {self.pokes.get(phase)}; well-formed {self.requests.get(phase)}"
                          for phase in self.pokes] + [f"  {target}: {name}" for target, name in sorted(self.names.items())])


class StrangerProcess(Stranger):
    """The stranger as a process of its own, started by ``command_prefix`` (``ip netns exec NS`` puts it on
    another host), with the backend's framework imported before the first visit (a visit the moment a port
    opens cannot wait for an import). :meth:`close` ends it and reads back what happened."""

    def __init__(self, backend: str, command_prefix: list[str], env: Optional[dict[str, str]] = None) -> None:
        super().__init__(backend)
        self._errors = tempfile.TemporaryFile("w+")  # a framework client's logging cannot fill a pipe and block it
        self.process = subprocess.Popen([*command_prefix, sys.executable, __file__, backend], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self._errors, text=True, env=env)
        ready = self.process.stdout.readline() if self.process.stdout else ""
        if ready.strip() != "ready":
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"the stranger process did not start: {ready}{self.errors()}")

    def errors(self) -> str:
        """The end of what the stranger process wrote to its standard error."""
        self._errors.seek(0)
        return self._errors.read()[-2000:]

    def _say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def visit(self, phase: str, port: int, name: str = "", address: str = HOST) -> None:
        self._say(f"{phase} {address} {port} {name}")

    def settle(self, timeout: float = 5) -> None:
        self._say(f"settle {timeout}")
        assert self.process.stdout is not None
        self.process.stdout.readline()  # "settled"

    def hold(self, address: str, port: int, timeout: float = 60) -> None:
        """Connect to ``address:port`` as soon as it listens (within ``timeout`` seconds) and keep the connection
        open, sending nothing, until :meth:`leave`."""
        self._say(f"hold {address} {port} {timeout}")
        assert self.process.stdout is not None
        answer = self.process.stdout.readline().strip()
        if answer != "held":
            raise RuntimeError(f"the stranger could not connect to {address}:{port}: {answer}")

    def leave(self) -> None:
        """Close the connections :meth:`hold` keeps."""
        self._say("leave")
        assert self.process.stdout is not None
        self.process.stdout.readline()  # "left"

    def close(self) -> None:
        if self.process.poll() is not None:
            return
        try:
            output, _ = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            output, _ = self.process.communicate()
        if self.process.returncode != 0 or not output.strip():
            raise RuntimeError(f"the stranger process failed ({self.process.returncode}): {self.errors()}")
        seen = json.loads(output.strip().splitlines()[-1])
        self.pokes, self.requests, self.names = seen["pokes"], seen["requests"], seen["names"]


def _hold(address: str, port: int, timeout: float, held: list[socket.socket]) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            held.append(socket.create_connection((address, port), timeout=1))
            return "held"
        except OSError as error:
            if time.monotonic() > deadline:
                return f"{type(error).__name__}: {error}"
            time.sleep(0.005)


def _serve(backend: str) -> None:
    """The stranger process: visits what its input names, prints what happened as JSON at the end."""
    if backend in ("torch", "paddle"):
        __import__(backend)
    stranger = Stranger(backend)
    print("ready", flush=True)
    held: list[socket.socket] = []
    for line in sys.stdin:
        words = line.split(maxsplit=3)
        if words and words[0] == "settle":
            stranger.settle(float(words[1]))
            print("settled", flush=True)
        elif words and words[0] == "hold":
            print(_hold(words[1], int(words[2]), float(words[3]), held), flush=True)
        elif words and words[0] == "leave":
            for connection in held:
                connection.close()
            held.clear()
            print("left", flush=True)
        elif len(words) >= 3:
            stranger.visit(words[0], int(words[2]), words[3].strip() if len(words) > 3 else "", words[1])
    stranger.settle()
    print(json.dumps({"pokes": stranger.pokes, "requests": stranger.requests, "names": stranger.names}), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # for tests.*
    _serve(sys.argv[1])
