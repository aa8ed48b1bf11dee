"""Shared machinery of the benchmarks: interleaved timed rounds, per-round ratios, peak RSS.

Written once for every backend; the framework-specific parts live in ``bench/hands/``.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable, Sequence

Epoch = Callable[[], None]


def timed(fn: Epoch, finish: Callable[[], None] = lambda: None) -> tuple[float, float, float]:
    """Wall, process-CPU and calling-thread-CPU seconds of ``fn()`` plus ``finish()`` (queued work),
    prints discarded. The calling thread's CPU shows a loop that spins while it waits for the
    framework's worker threads (a busy wait takes a core from them on a small machine)."""
    gc.collect()
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):  # the raw bar's lines
        wall, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
        fn()
        finish()
        return time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - thread


Times = dict[str, list[float]]


def interleave(contenders: dict[str, Epoch], rounds: int, warmup: int,
               finish: Callable[[], None] = lambda: None) -> tuple[Times, Times, Times]:
    """Run every contender ``warmup`` untimed then ``rounds`` timed times, interleaved.

    The order rotates each round and reverses every other round, so drift in machine speed hits
    every contender alike. Returns per-contender lists of wall, process-CPU and main-thread-CPU
    seconds, one per round.
    """
    for _ in range(warmup):
        for epoch in contenders.values():
            timed(epoch, finish)
    names = list(contenders)
    walls: Times = {name: [] for name in names}
    cpus: Times = {name: [] for name in names}
    threads: Times = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order.reverse()
        for name in order:
            wall, cpu, thread = timed(contenders[name], finish)
            walls[name].append(wall)
            cpus[name].append(cpu)
            threads[name].append(thread)
    return walls, cpus, threads


def per_round(times: Sequence[float], base: Sequence[float]) -> list[float]:
    """``times[i] / base[i]`` for each round (both contenders ran in the same round)."""
    return [t / b for t, b in zip(times, base)]


def print_table(walls: Times, cpus: Times, batches: int, base: str = "hand", threads: Times | None = None) -> None:
    """Median and min per round, us per batch, the ratios to ``base`` (wall and CPU) and, given
    ``threads``, the main thread's CPU per batch."""
    print(f"  {'contender':<16} {'median ms/round':>16} {'min ms/round':>13} {'us/batch':>9} {'vs hand':>8} "
          f"{'cpu vs hand':>12}" + (f" {'main cpu us/batch':>18}" if threads else ""))
    base_med = statistics.median(walls[base])
    for name in walls:
        med = statistics.median(walls[name])
        cpu = statistics.median(per_round(cpus[name], cpus[base]))
        main = f" {1e6 * statistics.median(threads[name]) / batches:18.1f}" if threads else ""
        print(f"  {name:<16} {1e3 * med:16.1f} {1e3 * min(walls[name]):13.1f} "
              f"{1e6 * med / batches:9.1f} {med / base_med:8.3f} {cpu:12.3f}{main}")
    print("  (vs hand: ratio of median wall times; cpu vs hand: median per-round ratio of process CPU time,\n"
          "   which other processes on the machine disturb less" +
          ("; main cpu: the CPU of the thread running the loop,\n   median per round, per batch" if threads else "")
          + ")")


def ratio_line(name: str, walls: dict[str, list[float]], batches: int, base: str = "hand", note: str = "") -> float:
    """Print the per-round ``name/base`` ratio (median, min, max) and return its median."""
    ratios = per_round(walls[name], walls[base])
    extra = 1e6 * (statistics.median(walls[name]) - statistics.median(walls[base])) / batches
    print(f"  per-round ratio {name + '/' + base + ':':<22} median {statistics.median(ratios):.3f}  "
          f"min {min(ratios):.3f}  max {max(ratios):.3f}  {note or f'(~{extra:+.1f} us/batch)'}")
    return statistics.median(ratios)


# ---------------------------------------------------------------------- peak RSS
def peak_rss_mib() -> float:
    """This process's peak resident set size so far, MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report_rss() -> None:
    """Called last in a worker process: its peak RSS as one JSON line on stdout."""
    print(json.dumps({"peak_rss_mib": peak_rss_mib()}))


def measure_rss(argv_for: Callable[[str], list[str]], names: Sequence[str], runs: int,
                env: dict[str, str]) -> dict[str, list[float]]:
    """Peak RSS of each named worker, each run in a fresh process, ``runs`` times interleaved."""
    peaks: dict[str, list[float]] = {name: [] for name in names}
    for r in range(runs):
        for name in (names if r % 2 == 0 else list(reversed(names))):
            done = subprocess.run([sys.executable, *argv_for(name)], capture_output=True, text=True, env=env)
            if done.returncode != 0:
                raise RuntimeError(f"RSS worker {name!r} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            peaks[name].append(json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_mib"])
    return peaks


def bench_parser(description: str, backends: Sequence[str], rounds: int) -> argparse.ArgumentParser:
    """The options every benchmark has: ``--backend`` (default torch) and ``--rounds``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=backends, default="torch", help="framework (default torch)")
    parser.add_argument("--rounds", type=int, default=rounds, help=f"interleaved timed rounds (default {rounds})")
    return parser


def require_at_least(parser: argparse.ArgumentParser, args: argparse.Namespace, minimum: int,
                     names: Sequence[str]) -> None:
    """Exit with the parser's usage error unless every option in ``names`` is at least ``minimum``."""
    low = [name for name in names if getattr(args, name) < minimum]
    if low:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in low)
        parser.error(f"{flags} must be >= {minimum}")
