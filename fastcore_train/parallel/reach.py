"""Reaching a job's master, or saying clearly why not (issue 39), written once for every backend.

A rank that cannot reach its master's store waits inside the framework, silent, for the store's whole
timeout (torch's client retries for as long as its timeout). Before that, :func:`wait_for_master` tries
a plain TCP connection itself: it says what it waits for while it waits, stops at once where waiting
cannot help (a name that does not resolve, no route to the address), and after ``timeout`` seconds
raises :class:`MasterUnreachableError` naming the address, the interface this machine's route toward it
leaves from, what the last attempt met, and what to check. The master's side of the same wait (ranks
that never join) is :func:`too_few_joined`; where a framework's own join cannot be given a timeout,
:func:`joined_within` ends the rank with that message once the timeout has passed. A connection that is opened and closed without a word is
what any prober does: the stores ignore it.
"""
from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

#: Seconds between two attempts to connect (doubling from the first to the last), and before the first
#: "still waiting" message.
FIRST_RETRY_SECONDS, RETRY_SECONDS = 0.02, 0.5
FIRST_NOTICE_SECONDS = 10.0
NOTICE_EVERY_SECONDS = 30.0
#: Errors after which waiting cannot help: no route to that network, a name that does not resolve.
_PERMANENT = {errno.ENETUNREACH}


class MasterUnreachableError(ConnectionError):
    """A rank could not open a connection to its job's master within the connect timeout."""


def _route_words(host: str) -> str:
    from fastcore_train.parallel.route import interface_toward

    route = interface_toward(host)
    if route is None:
        return "this machine has no route toward it"
    return f"this machine's route toward it leaves through interface {route[0]} (address {route[1]})"


def _what_happened(error: Optional[BaseException]) -> str:
    if error is None:
        return "no attempt finished"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused: that host answers, but nothing listens on that port (yet)"
    if isinstance(error, (socket.timeout, TimeoutError)):
        return "no answer: the host is down, the address is wrong, or a firewall drops the packets"
    if isinstance(error, OSError) and error.errno == errno.EHOSTUNREACH:
        return "no host answers at that address on its network"
    if isinstance(error, OSError) and error.errno == errno.ENETUNREACH:
        return "no route to that network from this machine"
    return f"{type(error).__name__}: {error}"


def unreachable_message(host: str, port: int, rank: int, waited: float, error: Optional[BaseException]) -> str:
    """What a rank says when it gives up on its master."""
    return (f"rank {rank} could not reach the job's master at {host}:{port} in {waited:.0f} s: "
            f"{_what_happened(error)}; {_route_words(host)}.\n"
            f"Check that: rank 0 was started on that host with MASTER_PORT={port}; MASTER_ADDR ({host}) is that "
            f"host's address as seen from this machine (not a name that resolves to 127.0.0.1 on it); the hosts "
            f"reach each other on that port (ping, a firewall rule); where this machine has several networks, the "
            f"route above is the one to the master (else set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME). "
            f"collective_timeout sets how long a rank waits.")


def too_few_joined(host: str, port: int, world_size: int, waited: float, detail: str) -> str:
    """What rank 0 says when the other ranks did not all join it."""
    return (f"rank 0 waited {waited:.0f} s at {host}:{port} for the job's {world_size} ranks, and not all of them "
            f"joined ({detail.strip()}); {_route_words(host)}.\n"
            f"Check that every node was started, with MASTER_ADDR={host} MASTER_PORT={port} and a WORLD_SIZE that "
            f"counts every rank, and that the other hosts reach this one on that port (a firewall rule). "
            f"collective_timeout sets how long rank 0 waits.")


def _resolve(host: str, port: int) -> tuple[int, tuple]:
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)[0]
    except (socket.gaierror, UnicodeError) as error:
        raise MasterUnreachableError(f"the job's master address MASTER_ADDR={host!r} does not resolve ({error}): "
                                     f"set it to the master host's address or a name this machine resolves.") from error
    return family, address


def wait_for_master(host: str, port: int, rank: int, timeout: float,
                    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True)) -> None:
    """Return once a TCP connection to ``host:port`` opens; meanwhile ``say`` what is awaited now and then.
    Raise :class:`MasterUnreachableError` after ``timeout`` seconds, or at once where waiting cannot help."""
    family, address = _resolve(host, port)
    start = time.monotonic()
    deadline, notice = start + timeout, start + min(FIRST_NOTICE_SECONDS, timeout / 2)
    error: Optional[BaseException] = None
    pause = FIRST_RETRY_SECONDS
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise MasterUnreachableError(unreachable_message(host, port, rank, timeout, error))
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.settimeout(min(5.0, max(left, 0.1)))
                probe.connect(address)
            return
        except OSError as caught:
            error = caught
            if caught.errno in _PERMANENT:
                raise MasterUnreachableError(unreachable_message(host, port, rank, time.monotonic() - start,
                                                                 caught)) from caught
        now = time.monotonic()
        if now >= notice:
            say(f"[rank {rank}] still waiting for the job's master at {host}:{port} ({_what_happened(error)}); "
                f"giving up in {deadline - now:.0f} s.")
            notice = now + NOTICE_EVERY_SECONDS
        time.sleep(min(pause, max(deadline - now, 0)))
        pause = min(2 * pause, RETRY_SECONDS)


#: The watcher :func:`joined_within` starts: it waits for its stdin to close (the block finished, or this
#: process is gone) for ``timeout`` seconds; past that it says why and ends this process.
_WATCHER = """import os, select, signal, sys
timeout, parent, message = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if not select.select([sys.stdin], [], [], timeout)[0]:
    sys.stderr.write(message + "\\n")
    sys.stderr.flush()
    os.kill(parent, signal.SIGKILL)
"""


@contextmanager
def joined_within(timeout: float, message: str) -> Iterator[None]:
    """End this process, saying ``message`` on stderr, if the block (a framework's own joining of the job's
    ranks, which waits without a limit or a word) has not finished in ``timeout`` seconds.

    The watch is a small process of its own: a framework waiting in C++ may hold the GIL, so that no thread
    of this process could speak in time (paddle's ``init_parallel_env`` does)."""
    watcher = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHER, str(timeout), str(os.getpid()), message],
                               stdin=subprocess.PIPE)
    try:
        yield
    finally:
        assert watcher.stdin is not None
        watcher.stdin.close()
        watcher.wait()
