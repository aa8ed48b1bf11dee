"""Data-parallel speed-up on CPU: 2 DDP ranks against 1 process, through the Trainer and by hand.

Trains one compute-bound MLP (512-2048-2048-10, batch 256 per rank, SGD lr 0.01) on seeded random
data served as ``{"x", "y"}`` dicts by a torch ``DataLoader``, in four configurations, each in
fresh processes that this script starts (it launches itself with ``--worker NAME``):

* ``hand 1-proc``: a plain ``forward / cross_entropy / backward / step / zero_grad`` loop in one
  process with ``torch.set_num_threads(cores)``.
* ``hand DDP``: the same loop on a ``DistributedDataParallel`` model (gloo), 2 ranks started by
  this script, each with ``torch.set_num_threads(cores // 2)`` and a ``DistributedSampler``.
* ``trainer 1-proc``: ``Trainer(driver="torch", device="cpu", progress_bar=None)``, threads = cores.
* ``trainer DDP``: ``Trainer(driver="torch", device=["cpu", "cpu"], progress_bar=None)`` run as a
  plain ``python bench/ddp.py --worker ...``: rank 0 self-launches rank 1, and the DDP driver
  sets each rank's threads (``cores // local world size``); this script does not.
* ``trainer torchrun`` (with ``--torchrun``): the same Trainer under
  ``python -m torch.distributed.run --standalone --nproc_per_node 2``.
* ``hand 1-proc, half threads`` (with ``--scaling``): the hand loop in 1 process with a DDP
  rank's threads (``cores // 2``), to show how well ``cores`` threads scale.

Every configuration warms up (``--warmup`` steps, then a fresh epoch starts), then times one
epoch of ``--steps`` steps per rank: every rank gets ``--steps`` batches of 256 samples, so the
2-rank runs process twice the samples. Rank 0 takes a time stamp after every step (the hand
loops after ``zero_grad``, the Trainer through one ``on_train_batch_end`` listener, its only
one); the DDP timings start after a barrier and end after the last step's gradients are reduced,
so the slower rank sets them. The configurations run one after another (never two at once),
``--repeats`` times, the order reversed on every other repeat.

Reported, per configuration: rank 0's median step time in its best repeat (the one with the
shortest median: other work on a shared machine only ever slows a run down) and the total of the
timed steps (median over repeats), each turned into samples/s; then

* ``ddp speed-up`` = trainer DDP samples/s / trainer 1-proc samples/s, from the step times; the
  number the target applies to. The same ratio from the totals, and per repeat, is printed too.
* the same ratio for the hand-written loops: what this machine allows, with no toolkit involved,
  so a gap between the two is the toolkit's and a low hand ratio is the machine's.

Note what the ratio compares on a machine of N cores: 2 ranks of N/2 threads against 1 process
of N threads on the same cores. It exceeds 1 only as far as N threads scale worse than N/2 do,
minus what the gradient all-reduce costs; the hand-written ratio shows that ceiling.

Same data, same start: the final weights of hand 1-proc and trainer 1-proc must agree, and so
must those of hand DDP and trainer DDP (both split the data ``indices[rank::2]``), and the two
ranks of a DDP run; the script prints whether they do.

It is a measurement, not a test: it always exits 0 and prints PASS or MISS against the target.

    .venv/bin/python bench/ddp.py [--steps 30] [--warmup 5] [--repeats 3] [--torchrun] [--scaling] [--profile]
"""
from __future__ import annotations

import argparse
import hashlib
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

from fastcore_train.parallel.launch import free_port  # noqa: E402  (stdlib only: loads no framework)

TARGET = 1.6
SIZES = (512, 2048, 2048, 10)
BATCH_SIZE = 256  # per rank
WORLD_SIZE = 2
LR = 0.01

# name -> (label, ranks, how it is started)
CONFIGS = {
    "hand-1proc": ("hand 1-proc", 1, "python"),
    "hand-1proc-half": ("hand 1-proc, half threads", 1, "python"),  # --scaling: cores // 2 threads
    "hand-ddp": ("hand DDP", WORLD_SIZE, "spawn"),
    "trainer-1proc": ("trainer 1-proc", 1, "python"),
    "trainer-ddp": ("trainer DDP (self-launch)", WORLD_SIZE, "python"),
    "trainer-torchrun": ("trainer DDP (torchrun)", WORLD_SIZE, "torchrun"),
}
# Launcher variables that must not leak from this process into the workers' environment.
LAUNCH_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID", "FASTCORE_TRAIN_LAUNCHED_RANK")


def cores() -> int:
    """What the DDP driver divides among local ranks (it uses ``os.cpu_count()``)."""
    return os.cpu_count() or 1


# ====================================================================== worker side
def build_task(steps: int, world_size: int, seed: int = 0):
    import numpy as np
    import torch
    from torch.utils.data import Dataset

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers: list[torch.nn.Module] = []
            for i, (n_in, n_out) in enumerate(zip(SIZES, SIZES[1:])):
                if i:
                    layers.append(torch.nn.ReLU())
                layers.append(torch.nn.Linear(n_in, n_out))
            self.layers = torch.nn.Sequential(*layers)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layers(x)

        def train_step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"loss": torch.nn.functional.cross_entropy(self(x), y)}

    class DictDataset(Dataset):
        def __init__(self, x: Any, y: Any) -> None:
            self.x = torch.from_numpy(x)
            self.y = torch.from_numpy(y)

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
            return {"x": self.x[index], "y": self.y[index]}

    rng = np.random.default_rng(seed)
    n = steps * BATCH_SIZE * world_size  # one epoch = `steps` batches on every rank
    dataset = DictDataset(rng.standard_normal((n, SIZES[0]), dtype=np.float32),
                          rng.integers(0, SIZES[-1], size=n, dtype=np.int64))
    torch.manual_seed(seed)  # every configuration starts from the same weights
    model = MLP()
    return dataset, model, torch.optim.SGD(model.parameters(), lr=LR)


def weights_digest(model: Any) -> str:
    digest = hashlib.sha1()
    for p in model.parameters():
        digest.update(p.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()[:12]


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

    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    world_size = CONFIGS[name][1]
    rank = int(os.environ.get("RANK", "0"))  # set for hand DDP / torchrun; a self-launch sets it in setup
    profile = args.profile
    dataset, model, optimizer = build_task(args.steps, world_size)

    if name.startswith("hand"):
        from torch.utils.data.distributed import DistributedSampler
        torch.set_num_threads(max(1, cores() // (WORLD_SIZE if name == "hand-1proc-half" else world_size)))
        sampler = None
        if world_size > 1:
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
            model = torch.nn.parallel.DistributedDataParallel(model)
            sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False)
        loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False, sampler=sampler)
        cross_entropy = torch.nn.functional.cross_entropy
        barrier = dist.barrier if world_size > 1 else (lambda: None)

        def epoch(limit: Optional[int] = None, stamps: Optional[list[float]] = None) -> int:
            model.train()
            done = 0
            for batch in loader:
                loss = cross_entropy(model(batch["x"]), batch["y"])
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if stamps is not None:
                    stamps.append(perf_counter())
                done += 1
                if done == limit:
                    break
            return done

        epoch(args.warmup)
        barrier()
        with Timer(profile and rank == 0) as timer:
            steps = epoch(stamps=timer.stamps)
            barrier()
        unwrapped = model.module if world_size > 1 else model
        batch_size = loader.batch_size
    else:
        from fastcore_train import Event, Trainer
        if world_size == 1:
            torch.set_num_threads(cores())  # the DDP driver picks its ranks' threads itself
        device = "cpu" if world_size == 1 else ["cpu"] * world_size
        if name == "trainer-torchrun":
            device = "cpu"  # one device per rank; torchrun's environment says how many ranks
        trainer = Trainer(model, DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False), optimizer,
                          driver="torch", device=device, n_epochs=1, progress_bar=None)
        guard = [] if trainer.driver.data.reading_changes_results else ["NanGuardCallback"]
        assert [type(c).__name__ for c in trainer.callback_manager.callbacks] == guard, \
            "progress_bar=None should leave only the default NaN guard"
        rank = trainer.driver.comm.rank
        trainer.run(num_train_batch_per_epoch=args.warmup, num_eval_sanity_batch=0)
        trainer.state.cur_epoch_idx = 0  # a fresh epoch on the same Trainer, as in overhead.py
        before = trainer.global_forward_batches
        timer = Timer(profile and rank == 0)
        stamp = timer.stamps.append
        # The one listener: a time stamp per step (the hand loops take the same).
        trainer.add_callback_fn(Event.on_train_batch_end(), lambda _: stamp(perf_counter()))
        trainer.driver.comm.barrier()
        with timer:
            trainer.run(num_eval_sanity_batch=0)  # ends with barriers on every rank
        steps = trainer.global_forward_batches - before
        unwrapped = trainer.model
        batch_size = getattr(trainer.dataloader.batch_sampler, "batch_size", None)
        world_size = trainer.driver.comm.world_size

    result = {
        "config": name, "rank": rank, "world_size": world_size, "threads": torch.get_num_threads(),
        "steps": steps, "batch_size": batch_size, "seconds": timer.wall, "cpu_seconds": timer.cpu,
        "step_seconds": timer.step_seconds(),
        "weights": weights_digest(unwrapped), "torch": torch.__version__,
        "profile": timer.profile_text(steps),
    }
    out = Path(args.out_dir) / f"{name}.rank{rank}.json"
    out.write_text(json.dumps(result))
    if world_size > 1 and dist.is_initialized() and name.startswith("hand"):
        dist.destroy_process_group()


# ====================================================================== orchestrator side
def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


def run_config(name: str, args: argparse.Namespace, out_dir: Path, profile: bool = False) -> dict[str, Any]:
    """Start the configuration's process(es), wait, and read every rank's result file."""
    _, ranks, how = CONFIGS[name]
    for old in out_dir.glob(f"{name}.rank*.json"):
        old.unlink()
    worker_args = [str(Path(__file__).resolve()), "--worker", name, "--out-dir", str(out_dir),
                   "--steps", str(args.steps), "--warmup", str(args.warmup)] + (["--profile"] if profile else [])
    env = clean_env()
    commands: list[tuple[list[str], dict[str, str]]] = []
    if how == "python":
        commands.append(([sys.executable, *worker_args], env))
    elif how == "torchrun":
        commands.append(([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc_per_node", str(ranks), *worker_args], env))
    else:  # spawn the ranks of the hand-written DDP job ourselves
        master = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(ranks),
                  "LOCAL_WORLD_SIZE": str(ranks)}
        for rank in range(ranks):
            commands.append(([sys.executable, *worker_args],
                             {**env, **master, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
    started = time.perf_counter()
    # Each in a session of its own, so a hung job is killed with every process it started.
    jobs = [subprocess.Popen(command, env=job_env, cwd=str(REPO_ROOT), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
            for command, job_env in commands]
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
            errors.append(f"exit code {job.returncode}: {stderr.strip()[-1500:]}")
    process_seconds = time.perf_counter() - started
    results = []
    for rank in range(ranks):
        path = out_dir / f"{name}.rank{rank}.json"
        if path.is_file():
            results.append(json.loads(path.read_text()))
        else:
            errors.append(f"rank {rank} wrote no result")
    return {"name": name, "ranks": results, "process_seconds": process_seconds, "errors": errors}


def summarise(name: str, runs: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
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
        "ranks": ranks, "steps": steps, "batch_size": rank0[0]["batch_size"],
        "threads": sorted({r["threads"] for run in ok for r in run["ranks"]}),
        "totals": totals, "median_total": median_total, "step_medians": step_medians, "median_step": median_step,
        "samples_per_s": BATCH_SIZE * ranks / median_step,
        "samples_per_s_total": steps * BATCH_SIZE * ranks / median_total,
        "cpu_per_wall": [r["cpu_seconds"] / r["seconds"] for r in rank0], "best": best,
        "process_seconds": statistics.median(run["process_seconds"] for run in ok),
        "weights": [[r["weights"] for r in run["ranks"]] for run in ok],
    }


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per rank and configuration (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps first (default 5)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="times each configuration runs, order reversed every other time (default 3)")
    parser.add_argument("--torchrun", action="store_true", help="also time the Trainer under torch.distributed.run")
    parser.add_argument("--scaling", action="store_true",
                        help="also time the hand loop in 1 process with a DDP rank's threads (cores // 2)")
    parser.add_argument("--profile", action="store_true",
                        help="afterwards, cProfile the timed steps of rank 0 of hand DDP and trainer DDP")
    parser.add_argument("--timeout", type=float, default=150, help="seconds one configuration may take (default 150)")
    parser.add_argument("--worker", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--out-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.warmup < 1:
        parser.error("--warmup must be >= 1")

    if args.worker:
        worker(args.worker, args)
        return 0

    names = ["hand-1proc", "hand-ddp", "trainer-ddp", "trainer-1proc"]
    if args.torchrun:
        names.insert(3, "trainer-torchrun")
    if args.scaling:
        names.insert(1, "hand-1proc-half")
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

    summary = {name: summarise(name, runs[name]) for name in names}
    torch_version = next((run["ranks"][0]["torch"] for rs in runs.values() for run in rs if run["ranks"]), "?")
    print(f"fastcore_train DDP speed-up: MLP {'-'.join(map(str, SIZES))}, batch {BATCH_SIZE} per rank, SGD, "
          f"{args.steps} timed steps after {args.warmup} warm-up, {args.repeats} repeat(s), torch {torch_version}, "
          f"gloo, python {sys.version.split()[0]}")
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
    print(f"  (thr: torch threads per rank; step ms: rank 0's median step time in the best repeat (the one with\n"
          f"   the shortest); total s: the {args.steps} timed steps, slowest rank, median over repeats; samples/s:\n"
          f"   {BATCH_SIZE} x ranks per step, from the step time and from the total; x 1-proc: over the same kind's\n"
          f"   1-process samples/s; cpu/wall: rank 0's process CPU time over wall time in each repeat, * = best\n"
          f"   (gloo threads included), about {cores()} for an undisturbed 1-process run; proc s: the whole\n"
          f"   configuration, median: interpreter start, imports, rendezvous, self-launch, warm-up)")
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
    for label, trainer, hand in (("1 process", "trainer-1proc", "hand-1proc"), ("2 ranks", "trainer-ddp", "hand-ddp")):
        ratio = speedup(trainer, hand)
        if ratio is not None:
            print(f"  trainer / hand throughput, {label + ':':<11} {ratio:.3f} by step time, "
                  f"{speedup(trainer, hand, 'samples_per_s_total'):.3f} by total")

    def same(*names_: str) -> str:
        got = [summary.get(n) for n in names_]
        if not all(got):
            return "n/a"
        digests = {d for s in got for run in s["weights"] for d in run}
        return "yes" if len(digests) == 1 else f"NO ({len(digests)} distinct)"
    ddp_names = ["hand-ddp", "trainer-ddp"] + (["trainer-torchrun"] if args.torchrun else [])
    print(f"  same final weights: hand and trainer 1-proc: {same('hand-1proc', 'trainer-1proc')}; "
          f"hand and trainer DDP, every rank: {same(*ddp_names)}")
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
              f"{'; '.join(disturbed)}.\n  Something else was using the machine and the ratios partly measure that; "
              "run again when\n  it is quiet, or with more --repeats.")
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
    hand_ratio, trainer_ratio = speedup("hand-ddp", "hand-1proc"), speedup("trainer-ddp", "trainer-1proc")
    if hand_ratio is not None:
        print(f"hand-written ddp speed-up (2 ranks vs 1 process): {hand_ratio:.2f}  "
              "(reference: this machine, no toolkit)")
    if trainer_ratio is None:
        print(f"ddp speed-up (2 ranks vs 1 process): n/a  target >= {TARGET:.1f}  MISS")
    else:
        print(f"ddp speed-up (2 ranks vs 1 process): {trainer_ratio:.2f}  target >= {TARGET:.1f}  "
              f"{'PASS' if trainer_ratio >= TARGET else 'MISS'}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
