"""A rank pool: the real ranks of a data-parallel job, started once by the framework's own launcher
and reused for many test bodies (after PyTorch's ``MultiProcContinuousTest`` and DeepSpeed's
``reuse_dist_env``).

pytest's process starts the launcher (torchrun, paddle.distributed.launch, mpirun,
oneflow.distributed.launch; a plain process for one rank) with :mod:`tests.rankpool.worker` as the
script. Each rank connects back over a Unix socket, trains once to warm up (the driver joins the
ranks: the process group every body shares) and then runs bodies: a module-level function called
on every rank, in a folder of its own. :meth:`RankPool.run` returns each rank's return value.

- A body that raises on any rank fails its test with every rank's traceback and output.
- A body that outlives its timeout fails its test with every rank's stack (SIGUSR2) and output.
- After either, or when a body left something behind that cannot be put back (a thread, a file
  descriptor, a child process, a process group), the ranks are ended and the next body gets fresh
  ones. What can be put back (environment variables, working directory, signal handlers, ...) is
  put back in place. Both are reported as a :class:`RankPoolWarning`.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable, Optional, Union

from tests.distributed.launchers import Backend, job_environment
from tests.rankpool.protocol import BACKEND_ENV, SOCKET_ENV, WORLD_SIZE_ENV, Reply, Task

WORKER = Path(__file__).with_name("worker.py")
#: Seconds for the ranks to start, import the framework, join and train once.
START_TIMEOUT = 300.0
#: Seconds the other ranks get to answer once one rank's body failed (they may wait in a collective for it).
FAILURE_GRACE = 10.0
#: Seconds the ranks get to leave when the pool is closed.
STOP_TIMEOUT = 30.0


class RankPoolWarning(UserWarning):
    """A body left state behind in the ranks (put back, or the ranks were replaced)."""


class PoolError(AssertionError):
    """The pool could not start, or a body failed or hung: the message shows every rank's end of output."""


class BodyFailed(PoolError):
    pass


class BodyTimedOut(PoolError):
    pass


def _tail(path: Path, size: int = 3000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-size:]


def target_of(body: Union[str, Callable[..., Any]]) -> str:
    """``"module:function"`` for a module-level function (or the string itself)."""
    if isinstance(body, str):
        return body
    if "<locals>" in body.__qualname__ or body.__module__ == "__main__":
        raise ValueError(f"a pool body must be a module-level function the ranks can import, got {body!r}")
    return f"{body.__module__}:{body.__qualname__}"


class RankPool:
    """``world_size`` ranks of ``backend`` started by its launcher (one plain process for 1), reused by
    :meth:`run`; ``folder`` holds each start's launcher log and each body's folder. ``backend=None``:
    one plain process with no framework (the pool's own framework-free tests)."""

    def __init__(self, backend: Optional[Backend], world_size: int, folder: Path) -> None:
        if backend is None and world_size != 1:
            raise ValueError("a pool without a backend is one plain process (world_size=1)")
        self.backend, self.world_size, self.folder = backend, world_size, Path(folder)
        self.launcher = backend.launcher if world_size > 1 else "plain"
        self.process: Optional[subprocess.Popen] = None
        self.connections: dict[int, Connection] = {}
        self.pids: dict[int, int] = {}
        #: How many times ranks were started, and bodies run (for the suite's report).
        self.starts = 0
        self.bodies = 0
        #: The replies of the last body, by rank (its seconds, what it left behind).
        self.last_replies: dict[int, Reply] = {}
        #: The folder of the last body (each rank's stdout and stderr are there).
        self.last_folder: Optional[Path] = None
        self._run_folder: Optional[Path] = None
        self._socket_folder: Optional[str] = None

    def __repr__(self) -> str:
        name = self.backend.name if self.backend is not None else "no framework"
        return f"RankPool({name}, {self.world_size} ranks by {self.launcher})"

    # ------------------------------------------------------------------ starting and stopping
    @property
    def running(self) -> bool:
        return self.process is not None

    def _command(self) -> list[str]:
        if self.world_size == 1:
            return [sys.executable, str(WORKER)]
        return self.backend.launch([str(WORKER)], self.backend.launcher, self.world_size, self._run_folder)

    def start(self) -> None:
        """Start the ranks and wait until every one has connected and warmed up."""
        self.starts += 1
        self._run_folder = self.folder / f"start_{self.starts}"
        self._run_folder.mkdir(parents=True)
        self._socket_folder = tempfile.mkdtemp(prefix="rankpool-")  # mode 0700: only this user may connect
        address = os.path.join(self._socket_folder, "pool.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(self.world_size)
        server.settimeout(0.2)
        env = {**job_environment(), SOCKET_ENV: address, WORLD_SIZE_ENV: str(self.world_size),
               BACKEND_ENV: self.backend.name if self.backend is not None else ""}
        with open(self._run_folder / "launcher.log", "w") as log:
            self.process = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            cwd=self._run_folder, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while len(self.connections) < self.world_size:
                self._check_starting(deadline, "connect")
                try:
                    accepted, _ = server.accept()
                except socket.timeout:
                    continue
                accepted.settimeout(None)
                connection = Connection(accepted.detach())
                hello = connection.recv()
                self.connections[hello["rank"]] = connection
                self.pids[hello["rank"]] = hello["pid"]
            waiting = dict(self.connections)
            while waiting:
                self._check_starting(deadline, "warm up")
                for connection in wait(list(waiting.values()), timeout=0.2):
                    rank = next(r for r, c in waiting.items() if c is connection)
                    try:
                        connection.recv()
                    except (EOFError, OSError):
                        self._start_failed(f"rank {rank} ended while warming up")
                    del waiting[rank]
        except BaseException:
            self.kill()
            raise
        finally:
            server.close()

    def _check_starting(self, deadline: float, what: str) -> None:
        if self.process.poll() is not None:
            self._start_failed(f"the launcher exited with code {self.process.returncode} before every rank "
                               f"could {what}")
        if time.monotonic() > deadline:
            self._start_failed(f"the ranks did not {what} within {START_TIMEOUT:.0f} s")

    def _start_failed(self, why: str) -> None:
        self.kill()
        raise PoolError(f"{self}: {why}.\n{self._launcher_output()}")

    def _launcher_output(self) -> str:
        folder = self._run_folder
        if folder is None:
            return ""
        logs = self.backend.launcher_logs(folder)[-3000:] if self.backend is not None else ""
        return f"--- launcher output ({folder / 'launcher.log'}):\n{_tail(folder / 'launcher.log')}\n{logs}"

    def stop(self) -> None:
        """Tell every rank to leave, and wait for the launcher to end (kill everything after
        :data:`STOP_TIMEOUT`)."""
        if self.process is None:
            return
        for connection in self.connections.values():
            try:
                connection.send(None)
            except OSError:
                pass
        try:
            self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self) -> None:
        """End every rank and the launcher now (the ranks may sit in sessions of their own)."""
        if self.process is None:
            return
        for pid in [*self.pids.values(), self.process.pid]:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self.process.wait()
        for connection in self.connections.values():
            connection.close()
        self.process, self.connections, self.pids = None, {}, {}
        if self._socket_folder is not None:
            shutil.rmtree(self._socket_folder, ignore_errors=True)
            self._socket_folder = None

    # ------------------------------------------------------------------ running bodies
    def run(self, body: Union[str, Callable[..., Any]], *args: Any, timeout: float = 120.0,
            folder: Optional[Path] = None, **kwargs: Any) -> list[Any]:
        """Call ``body(*args, **kwargs)`` on every rank; its return values, by rank.

        ``folder``: the body's working folder (default: a new one in the pool's folder), where
        ``rank_<r>.stdout`` and ``.stderr`` hold what each rank printed. Raises :class:`BodyFailed`
        or :class:`BodyTimedOut` (and the next body gets fresh ranks).
        """
        if not self.running:
            self.start()
        self.bodies += 1
        folder = Path(folder) if folder is not None else self.folder / f"body_{self.bodies}"
        folder.mkdir(parents=True, exist_ok=True)
        self.last_folder = folder
        task = Task(target_of(body), args, kwargs, str(folder))
        for connection in self.connections.values():
            connection.send(task)
        replies, ended = self._collect(timeout)
        self.last_replies = {rank: reply for rank, reply in replies.items() if reply is not None}
        failed = {rank for rank, reply in replies.items() if reply is None or reply.error}
        if failed or ended:
            self.kill()
            error = BodyTimedOut if ended and not failed else BodyFailed
            raise error(self._report(task, folder, replies, ended, timeout))
        self._after_success(replies)
        return [replies[rank].value for rank in sorted(replies)]

    def output(self, stream: str = "stderr") -> str:
        """What every rank wrote to ``stream`` ("stdout" or "stderr") during the last body, rank 0's first."""
        return "".join(_tail(self.last_folder / f"rank_{rank}.{stream}", size=10**7) for rank in range(self.world_size))

    def _collect(self, timeout: float) -> tuple[dict[int, Optional[Reply]], list[int]]:
        """Every rank's reply (None: it ended without one); and the ranks that did not answer in time."""
        pending = dict(self.connections)
        replies: dict[int, Optional[Reply]] = {}
        deadline = time.monotonic() + timeout
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for connection in wait(list(pending.values()), timeout=remaining):
                rank = next(r for r, c in pending.items() if c is connection)
                try:
                    replies[rank] = connection.recv()
                except (EOFError, OSError):
                    replies[rank] = None
                del pending[rank]
                if replies[rank] is None or replies[rank].error:
                    deadline = min(deadline, time.monotonic() + FAILURE_GRACE)
        if pending:  # every thread's stack into the rank's stderr file, before the ranks are ended
            for rank in pending:
                try:
                    os.kill(self.pids[rank], signal.SIGUSR2)
                except ProcessLookupError:
                    pass
            time.sleep(1.0)
        return replies, sorted(pending)

    def _report(self, task: Task, folder: Path, replies: dict[int, Optional[Reply]], ended: list[int],
                timeout: float) -> str:
        lines = [f"{self}: body {task.target} failed (its folder: {folder})."]
        for rank in range(self.world_size):
            reply = replies.get(rank)
            if rank in ended:
                lines.append(f"=== rank {rank}: did not finish within {timeout:g} s (its threads' stacks end its stderr)")
            elif reply is None:
                lines.append(f"=== rank {rank}: ended without answering (killed, os._exit, or a crash)")
            elif reply.error:
                lines.append(f"=== rank {rank}: raised\n{reply.error}")
            else:
                lines.append(f"=== rank {rank}: finished in {reply.seconds:.1f} s")
            for suffix in ("stdout", "stderr"):
                text = _tail(folder / f"rank_{rank}.{suffix}")
                if text.strip():
                    lines.append(f"--- rank {rank} {suffix}:\n{text}")
        lines.append(self._launcher_output())
        return "\n".join(lines)

    def _after_success(self, replies: dict[int, Optional[Reply]]) -> None:
        restored = sorted({f"rank {rank}: {item}" for rank, reply in replies.items() for item in reply.restored})
        dirty = sorted({f"rank {rank}: {item}" for rank, reply in replies.items() for item in reply.dirty})
        if restored:
            warnings.warn(RankPoolWarning(f"{self}: the body changed what was put back: {'; '.join(restored)}"))
        if dirty:
            warnings.warn(RankPoolWarning(f"{self}: the body left behind what cannot be put back, so the next body "
                                          f"gets fresh ranks: {'; '.join(dirty)}"))
            self.stop()


class RankPools:
    """The session's pools of one backend, one per world size, started when first used."""

    def __init__(self, backend: Backend, folder: Path) -> None:
        self.backend, self.folder = backend, Path(folder)
        self.pools: dict[int, RankPool] = {}

    def get(self, world_size: int = 2) -> RankPool:
        if world_size not in self.pools:
            self.pools[world_size] = RankPool(self.backend, world_size, self.folder / f"{world_size}_ranks")
        return self.pools[world_size]

    def close(self) -> None:
        for pool in self.pools.values():
            pool.stop()
