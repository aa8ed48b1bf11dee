"""Run docs examples in fresh processes that start with the framework already imported.

Each docs example used to start an interpreter that imported its framework (torch: 2-3 s) before it
ran for a fraction of that. The fork server imports the framework and fastcore_train once; for each
example it forks, and the child runs the script as ``python example.py`` would (``__main__``, its
folder first on ``sys.path``, its working directory, its environment, its own stdout and stderr),
then exits with the script's exit code. Nothing an example does reaches the next one: each is a new
process, a copy of one that has only imported modules.

Only for frameworks whose import leaves nothing that a fork would break (torch, paddle, and the
framework-free core); jittor (its compiler workers) and oneflow (its runtime's threads, started at
import) run their examples as scripts, as before.

The server: ``python forkserver.py MODULE [MODULE ...]`` (the modules to import), then one JSON
request per line on stdin (``{"script", "cwd", "env", "stdout", "stderr"}``), answered on stdout by
the child's pid (``{"pid"}``) and then its exit code (``{"returncode"}``). :class:`ForkServer` is
the test side.
"""
from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Optional

#: The frameworks whose examples may run in forked children (see the module docstring).
FORKABLE = ("torch", "paddle")


def run_child(request: dict) -> int:
    """In the forked child: become ``python <script>`` and run it; its exit code."""
    os.setsid()  # a process group of its own: the test ends it, and what it started, on a timeout
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script = request["script"]
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, (int, type(None))):
            print(exit_.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # as an interpreter at its end would
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def serve() -> None:
    for name in sys.argv[1:]:
        importlib.import_module(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        child = os.fork()
        if child == 0:
            os._exit(run_child(request))
        print(json.dumps({"pid": child}), flush=True)
        _, status = os.waitpid(child, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


class ForkServer:
    """The test side: a server importing ``modules``, started with ``env`` (every example's environment)."""

    def __init__(self, modules: list[str], env: dict[str, str]) -> None:
        self.env = env
        self.process = subprocess.Popen([sys.executable, __file__, *modules], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
        if "ready" not in self._answer(600):
            raise RuntimeError(f"the docs fork server could not import {modules}")

    def _answer(self, timeout: float) -> dict:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            raise TimeoutError(f"no answer from the docs fork server within {timeout} s")
        return json.loads(line)

    def run(self, script: Path, timeout: float) -> tuple[int, str, str]:
        """Run ``script`` in a forked child in its folder: ``(exit code, stdout, stderr)``; a child that
        outlives ``timeout`` is killed with everything it started (exit code -9)."""
        folder = script.parent
        request = {"script": str(script), "cwd": str(folder), "env": self.env,
                   "stdout": str(folder / "example.stdout"), "stderr": str(folder / "example.stderr")}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        child = self._answer(60)["pid"]
        try:
            returncode = self._answer(timeout)["returncode"]
        except TimeoutError:
            os.killpg(child, signal.SIGKILL)
            returncode = self._answer(60)["returncode"]
        read = lambda name: (folder / name).read_text(errors="replace")  # noqa: E731
        return returncode, read("example.stdout"), read("example.stderr")

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def framework_to_preload(backend: Optional[str]) -> Optional[list[str]]:
    """The modules a fork server imports for ``backend``'s examples (None for the core env); None when
    that backend's examples must run as scripts (see :data:`FORKABLE`)."""
    if backend is None:
        return ["fastcore_train", "numpy"]
    return ["fastcore_train", "numpy", backend] if backend in FORKABLE else None


if __name__ == "__main__":
    serve()
