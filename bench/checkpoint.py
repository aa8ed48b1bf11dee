"""What a checkpoint costs the training loop: blocking and asynchronous saves against the framework's raw save.

For ``--backend`` torch, paddle, jittor or oneflow, a Trainer trains the demo MLP made large
(``--features`` -> ``--hidden`` -> 10, Adam; the default is ~100 MB of weights, ~300 MB with
Adam's two moments). Every save is made from inside that training run, by a callback at the end of
a batch, as a CheckpointCallback would, and is measured by what it costs the run. In interleaved
rounds, each contender gets a window of ``--gap`` batches:

* ``none``: no save: the window's time without one (the baseline of its round);
* ``raw``: the framework's own save of the same state, the model's state dict and the
  optimizer's state in two files (``driver.io.write_object``, i.e. ``torch.save`` /
  ``paddle.save`` / ``jt.save`` / ``flow.save`` of ``model.state_dict()`` and the optimizer
  state): what a hand-written loop would do;
* ``raw_durable``: the same, then ``fsync`` of the files (the raw save made to survive a power cut);
* ``sync``: ``trainer.save_checkpoint(folder)``: the same files plus the random states, the JSON
  files and their checksums, written atomically (temporary folder, rename); flushed to disk after;
* ``async``: ``trainer.save_checkpoint(folder, blocking=False)``: snapshot to host memory, the
  write in the background.

Two figures per contender, medians over the rounds: **blocked**, the time the training thread
spent in the save call plus, for ``async``, waiting for the snapshot before the next optimizer
step; and **window**, the window's time minus the ``none`` window of the same round: everything
the save cost the run, including the background write competing for the cores.

Also: the resume time (``trainer.load_checkpoint``, checksums verified, against the framework's
raw load of the two files) and the size of rank 0's files at world sizes 1, 2 and 4 (ranks
simulated: the rank-state files of ranks 1.. written as those ranks would, meta.json as rank 0
would). Targets (issue 33): blocking save <= 1.05x the raw save, ``load_checkpoint`` <= 1.05x the
raw load, async stall <= 0.2x the raw save, on a model of >= 100 MB; each printed PASS or MISS by
the median and by the best round. ``--profile`` then runs one ``save_checkpoint`` and one
``load_checkpoint`` under cProfile and prints where their time went. A measurement, not a test:
it always exits 0.

    python bench/checkpoint.py [--backend torch] [--rounds 5] [--gap 4] [--features 1024] [--hidden 25600] [--profile]
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import _rounds  # noqa: E402
from bench.hands import BACKENDS  # noqa: E402

SYNC_TARGET = 1.05
LOAD_TARGET = 1.05
ASYNC_TARGET = 0.20
_JITTOR_ENV = {"use_mkl": "0", "nvcc_path": "", "FIX_TORCH_ERROR": "0", "log_silent": "1"}


CONTENDERS = ("none", "raw", "raw_overwrite", "raw_durable", "sync", "async")
#: The raw saves write a new folder and then delete the previous one (untimed), as a hand loop that
#: keeps its last checkpoint does, and as save_checkpoint does (it deletes the replaced one once the
#: new one is on disk). ``raw_overwrite`` deletes the previous one first, then writes.
ROTATING_RAW = ("raw", "raw_durable")


class SaveSchedule:
    """A callback: at the end of the batches it is given, runs that batch's save and records how
    long the training thread was blocked; records when every batch ended."""

    def __init__(self, plan: dict[int, str], saves: dict[str, Callable[[], None]], work: Path) -> None:
        self.plan, self.saves, self.work = plan, saves, work
        self.batch_ends: list[float] = []
        self.blocked: dict[int, float] = {}

    def on_train_batch_end(self, trainer: Any) -> None:
        self.batch_ends.append(time.perf_counter())
        batch = trainer.global_forward_batches
        name = self.plan.get(batch)
        if name is not None:
            trainer.wait_for_checkpoint()  # the previous window's write is done (untimed: not this save's)
            if name == "raw_overwrite":  # (untimed: the previous one goes first)
                clear(self.work / name)
            finish_queued_work(trainer.driver.backend)
            started = time.perf_counter()
            self.saves[name]()
            self.blocked[batch] = time.perf_counter() - started
            if name in ROTATING_RAW:  # (untimed: then the previous one goes)
                clear(self.work / name)
                (self.work / f"{name}.new").rename(self.work / name)
            self.batch_ends[-1] = started  # (the window starts with the save)


def finish_queued_work(backend: str) -> None:
    """Run what training has queued (untimed): jittor runs lazily and oneflow asynchronously, so
    otherwise whichever save first reads a tensor would be charged for the last steps' compute."""
    if backend == "jittor":
        import jittor as jt
        jt.sync_all(True)
    elif backend == "oneflow":
        import oneflow as flow
        flow._oneflow_internal.eager.Sync()


def build_trainer(backend: str, features: int, hidden: int, batches: int, callbacks: list[Any]) -> Any:
    """A Trainer over the backend's demo MLP (``features -> hidden -> 10``), Adam, batch 8, one epoch
    of ``batches`` batches."""
    import numpy as np

    from fastcore_train import Callback, Trainer
    framework = importlib.import_module(f"fastcore_train.backends.{backend}.demo").FRAMEWORK
    framework.seed(0)
    model = framework.model(features, hidden, 10)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batches * 8, features), dtype=np.float32)
    y = rng.integers(0, 10, size=batches * 8, dtype=np.int64)
    listeners = [type("Listener", (Callback,), {"on_train_batch_end": lambda self, t, c=c: c.on_train_batch_end(t)})()
                 for c in callbacks]
    return Trainer(model=model, train_dataloader=framework.dataloader(x, y, 8, False, 0),
                   optimizers=framework.optimizer(model, 1e-3), driver=backend, device="cpu", n_epochs=1,
                   progress_bar=None, model_summary=False, callbacks=listeners)


def folder_bytes(folder: Path, keep: Callable[[Path], bool] = lambda path: True) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and keep(path))


def size_of(path: Path) -> int:
    """Bytes of a file, or of every file in a folder (oneflow saves folders)."""
    return folder_bytes(path) if path.is_dir() else path.stat().st_size


def clear(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        path.unlink()


def make_saves(trainer_ref: list[Any], work: Path) -> dict[str, Callable[[], None]]:
    """The contenders' saves (``trainer_ref[0]`` is the trainer, built after them)."""

    def raw(folder: Path) -> None:
        io = trainer_ref[0].driver.io
        folder.mkdir()
        io.write_object(io.model_state(), folder / f"model{io.model_file_suffix}")
        io.write_object(io.training_state_object(), folder / f"training_state{io.model_file_suffix}")

    def raw_durable() -> None:  # the raw save, then on disk (what a checkpoint needs to survive a power cut)
        io = trainer_ref[0].driver.io
        (work / "raw_durable.new").mkdir()
        for name, state in (("model", io.model_state()), ("training_state", io.training_state_object())):
            path = work / "raw_durable.new" / f"{name}{io.model_file_suffix}"
            io.write_object(state, path)
            for file in ([path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]):
                with open(file, "rb") as handle:
                    os.fsync(handle.fileno())

    return {"none": lambda: None, "raw": lambda: raw(work / "raw.new"), "raw_overwrite": lambda: raw(work / "raw_overwrite"),
            "raw_durable": raw_durable,
            # (each replaces its previous checkpoint, as CheckpointCallback's "last" does)
            "sync": lambda: trainer_ref[0].save_checkpoint(work / "sync"),
            "async": lambda: trainer_ref[0].save_checkpoint(work / "async", blocking=False)}


def time_saves(backend: str, features: int, hidden: int, work: Path, rounds: int,
               gap: int) -> tuple[Any, dict[str, list[float]], dict[str, list[float]], list[float]]:
    """Interleaved rounds of every contender inside one training run; returns the trainer and, per
    contender, the seconds the training thread was blocked and the window's extra seconds."""
    warmup = 2  # batches before the first window (first allocations)
    plan: dict[int, str] = {}
    order: list[list[str]] = []
    batch = warmup
    for r in range(rounds + 1):  # round 0 warms up (page cache, host buffers) and is not counted
        names = list(CONTENDERS[r % len(CONTENDERS):] + CONTENDERS[:r % len(CONTENDERS)])
        names = names if r % 2 == 0 else names[::-1]
        order.append(names)
        for name in names:
            plan[batch] = name
            batch += gap
    trainer_ref: list[Any] = []
    schedule = SaveSchedule(plan, make_saves(trainer_ref, work), work)
    trainer = build_trainer(backend, features, hidden, batch + 1, [schedule])
    trainer_ref.append(trainer)
    waits: list[tuple[float, float]] = []
    gate = trainer._wait_for_checkpoint_snapshot

    def timed_gate() -> None:
        started = time.perf_counter()
        gate()
        waits.append((started, time.perf_counter() - started))

    trainer._wait_for_checkpoint_snapshot = timed_gate
    trainer.run(num_eval_sanity_batch=0)
    trainer.wait_for_checkpoint()
    ends = schedule.batch_ends  # ends[i]: the end of batch i + 1 (before any save in it)
    blocked: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    window: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    baseline: list[float] = []
    for r, names in enumerate(order):
        starts = {name: b for b, name in plan.items() if name in names and warmup + r * gap * len(CONTENDERS) <= b
                  < warmup + (r + 1) * gap * len(CONTENDERS)}
        spans = {name: ends[b - 1 + gap] - ends[b - 1] for name, b in starts.items()}
        if r == 0:
            continue
        baseline.append(spans["none"])
        for name, b in starts.items():
            window_end = ends[b - 1 + gap]
            gate_wait = sum(w for at, w in waits if ends[b - 1] <= at < window_end)
            blocked[name].append(schedule.blocked[b] + gate_wait)
            window[name].append(spans[name] - spans["none"])
    return trainer, blocked, window, baseline


def time_loads(trainer: Any, work: Path, rounds: int) -> dict[str, list[float]]:
    io = trainer.driver.io
    suffix = io.model_file_suffix

    def raw() -> None:
        io.load_model(work / "raw" / f"model{suffix}")
        io.load_training_state(work / "raw" / f"training_state{suffix}")

    loads = {"raw load": raw, "load_checkpoint": lambda: trainer.load_checkpoint(work / "sync")}
    times: dict[str, list[float]] = {name: [] for name in loads}
    for r in range(rounds):
        for name in (loads if r % 2 == 0 else list(loads)[::-1]):
            started = time.perf_counter()
            loads[name]()
            times[name].append(time.perf_counter() - started)
    return times


def profile_checkpoint(trainer: Any, work: Path, top: int = 18) -> str:
    """cProfile of one blocking ``save_checkpoint`` (over the previous one) and one
    ``load_checkpoint``: the ``top`` entries of each by cumulative time, as text."""
    import cProfile
    import io as text_io
    import pstats
    out = text_io.StringIO()
    for name, call in (("save_checkpoint", lambda: trainer.save_checkpoint(work / "sync")),
                       ("load_checkpoint", lambda: trainer.load_checkpoint(work / "sync"))):
        trainer.wait_for_checkpoint()
        finish_queued_work(trainer.driver.backend)
        profiler = cProfile.Profile()
        profiler.enable()
        call()
        profiler.disable()
        out.write(f"\n--- cProfile of one {name} (training thread; cumulative) ---\n")
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    trainer.wait_for_checkpoint()
    return out.getvalue()


def rank_zero_sizes(trainer: Any, work: Path, world_sizes: tuple[int, ...] = (1, 2, 4)) -> dict[int, dict[str, int]]:
    """Rank 0's bytes in a checkpoint written by ``n`` ranks (ranks 1.. simulated)."""
    from fastcore_train import checkpoint as ckpt
    from fastcore_train.utils.rank_state import read_rank_state, write_rank_state
    sizes = {}
    for n in world_sizes:
        folder = work / f"ranks_{n}"
        clear(folder)
        shutil.copytree(work / "sync", folder)
        state = read_rank_state(folder / ckpt.RANK_STATE_FILE.format(rank=0))
        for rank in range(1, n):  # what rank r writes itself
            write_rank_state(folder / ckpt.RANK_STATE_FILE.format(rank=rank), state)
        meta = json.loads((folder / ckpt.META_FILE).read_text())
        meta["world_size"] = n
        meta.pop("checksums")
        ckpt.write_json(folder / ckpt.META_FILE, dict(meta, checksums=ckpt.file_checksums(folder)))
        own = [ckpt.RANK_STATE_FILE.format(rank=rank) for rank in range(1, n)]
        model_files = (f"model{trainer.driver.io.model_file_suffix}", f"training_state{trainer.driver.io.model_file_suffix}")
        zero = lambda path: path.relative_to(folder).parts[0] not in own  # noqa: E731
        sizes[n] = {"rank0": folder_bytes(folder, zero),
                    "rank0_without_tensors": folder_bytes(folder, lambda p: zero(p) and
                                                          p.relative_to(folder).parts[0] not in model_files),
                    "per_other_rank": folder_bytes(folder, lambda p: not zero(p)) // max(n - 1, 1) if n > 1 else 0}
        clear(folder)
    return sizes


def parse_args(argv: Any) -> argparse.Namespace:
    parser = _rounds.bench_parser(__doc__.split("\n\n")[0], BACKENDS, rounds=5)
    parser.add_argument("--features", type=int, default=1024, help="MLP inputs (default 1024)")
    parser.add_argument("--hidden", type=int, default=25600, help="MLP hidden units (default 25600: 100 MiB of weights)")
    parser.add_argument("--gap", type=int, default=4, help="batches in each contender's window (default 4)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile one save_checkpoint and one load_checkpoint (cProfile, top entries)")
    args = parser.parse_args(argv)
    _rounds.require_at_least(parser, args, 1, ("rounds", "features", "hidden", "gap"))
    return args


def main(argv: Any = None) -> int:
    args = parse_args(argv)
    if args.backend == "jittor":
        for name, value in _JITTOR_ENV.items():
            os.environ.setdefault(name, value)
    import logging
    logging.getLogger("fastcore_train").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="fastcore_bench_ckpt_", dir=args.dir))
    trainer = None
    try:
        trainer, blocked, window, baseline = time_saves(args.backend, args.features, args.hidden, work, args.rounds, args.gap)
        model_mb = size_of(work / "raw" / f"model{trainer.driver.io.model_file_suffix}") / 2**20
        checkpoint_mb = folder_bytes(work / "sync") / 2**20
        loads = time_loads(trainer, work, args.rounds)
        sizes = rank_zero_sizes(trainer, work)
        profile = profile_checkpoint(trainer, work) if args.profile else ""
    finally:
        if trainer is not None:
            trainer.wait_for_checkpoint()
        shutil.rmtree(work, ignore_errors=True)

    raw = statistics.median(blocked["raw"])
    print(f"fastcore_train checkpoint cost ({args.backend}): MLP {args.features}-{args.hidden}-10, Adam, batch 8; "
          f"model file {model_mb:.0f} MB, checkpoint {checkpoint_mb:.0f} MB; {args.rounds} rounds, windows of "
          f"{args.gap} batches; python {platform.python_version()}, {os.cpu_count()} CPUs")
    print()
    print(f"  {'save (in a training run)':<32} {'blocked s':>9} {'min-max':>13} {'vs raw':>7} {'window s':>9} {'vs raw':>7}")
    labels = {"none": "none (window: baseline)", "raw": "raw (framework save)", "raw_overwrite": "raw, old one deleted first",
              "raw_durable": "raw + fsync (on disk)",
              "sync": "save_checkpoint (blocking)", "async": "save_checkpoint(blocking=False)"}
    raw_window = statistics.median(window["raw"])
    print(f"  (a window of {args.gap} batches without a save: {statistics.median(baseline):.3f} s)")
    for name in CONTENDERS:
        values, spans = blocked[name], window[name]
        print(f"  {labels[name]:<32} {statistics.median(values):9.3f} {min(values):6.3f}-{max(values):6.3f} "
              f"{statistics.median(values) / raw:7.2f} {statistics.median(spans):9.3f} "
              f"{statistics.median(spans) / raw_window:7.2f}")
    raw_load = statistics.median(loads["raw load"])
    for name, values in loads.items():
        print(f"  {name:<32} {statistics.median(values):9.3f} {min(values):6.3f}-{max(values):6.3f} "
              f"{statistics.median(values) / raw_load:7.2f}  (vs raw load)")
    print()
    print("  rank 0's files by world size (ranks 1.. simulated):")
    for n, size in sizes.items():
        print(f"    world size {n}: rank 0 {size['rank0']:,} bytes, of which not model/optimizer "
              f"{size['rank0_without_tensors']:,}; each other rank writes {size['per_other_rank']:,}")
    print()
    big = model_mb >= 100  # MiB
    note = '' if big else ' (model under 100 MB: not the target size)'
    rows = (("sync save / raw save (blocked)", blocked["sync"], blocked["raw"], SYNC_TARGET),
            ("async stall / raw save (blocked)", blocked["async"], blocked["raw"], ASYNC_TARGET),
            ("load_checkpoint / raw load", loads["load_checkpoint"], loads["raw load"], LOAD_TARGET))
    for label, values, base, target in rows:
        median_ratio = statistics.median(values) / statistics.median(base)
        best_ratio = min(values) / min(base)
        print(f"{label}: median {median_ratio:.2f}, best {best_ratio:.2f}  target <= {target:.2f}  "
              f"{'PASS' if median_ratio <= target else 'MISS'} (median), {'PASS' if best_ratio <= target else 'MISS'} "
              f"(best){note}")
    print(f"whole windows vs raw's: sync {statistics.median(window['sync']) / raw_window:.2f}, "
          f"async {statistics.median(window['async']) / raw_window:.2f} (the background work competing for the cores)")
    print(f"raw + fsync / raw save: median {statistics.median(blocked['raw_durable']) / raw:.2f} (what waiting for the "
          "disk costs; save_checkpoint flushes on its background writer instead)")
    if profile:
        print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
