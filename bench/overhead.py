"""Per-batch overhead of the fastcore_train Trainer against a hand-written torch loop.

Trains the same MLP (64-256-256-10, SGD, batch 32) on the same pre-generated data, through the
same kind of torch ``DataLoader``, once with ``Trainer.run`` and once with a plain
``forward / cross_entropy / backward / step / zero_grad`` loop, in one process. Rounds are
interleaved (hand, hand-again, trainer, trainer+raw, the order rotating each round) so drift in
machine speed hits every contender alike; each round is one epoch of ``--batches`` batches.

Reported:

* ``hand-again / hand``: a second, independent hand loop (own model, own loader); an A/A
  control whose spread shows how much of the other ratios is machine noise.
* ``trainer / hand``: Trainer built with ``progress_bar=None``; the number the target applies to.
* ``trainer+raw / hand``: Trainer built with ``progress_bar="raw"`` (what the default ``"auto"``
  resolves to when stdout is not a terminal); shows what the progress display costs.
* ``trainer+rich / hand``: the rich bar (what ``"auto"`` picks in a terminal), rendered to
  /dev/null.
* ``trainer+logs / hand``: the raw bar plus CSV and TensorBoard metric logs (loss every 50
  batches, the default), written to a temporary folder; skipped when tensorboardX is missing.
* ``import fastcore_train`` in a fresh interpreter (median of ``--import-runs`` runs), and whether
  it loaded any framework (torch, paddle, jittor, oneflow must stay unloaded).

It is a measurement, not a test: it always exits 0 and prints PASS or MISS against the target.

    .venv/bin/python bench/overhead.py [--rounds 20] [--batches 300] [--threads 1] [--profile]
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

TARGET = 1.03
FRAMEWORKS = ("torch", "paddle", "jittor", "oneflow")
SIZES = (64, 256, 256, 10)
BATCH_SIZE = 32


# ---------------------------------------------------------------------- import time
_IMPORT_PROBE = f"""
import json, sys, time
started = time.perf_counter()
import fastcore_train
elapsed = time.perf_counter() - started
print(json.dumps({{"seconds": elapsed,
                  "frameworks": [m for m in {FRAMEWORKS!r} if m in sys.modules],
                  "numpy": "numpy" in sys.modules,
                  "modules": len(sys.modules)}}))
"""


def measure_import(runs: int) -> dict[str, Any]:
    """``import fastcore_train`` timed inside fresh interpreters (interpreter start excluded)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    samples, frameworks, numpy_loaded, modules = [], set(), False, 0
    for _ in range(runs + 1):  # the first run may compile .pyc files; it is discarded
        done = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True,
                              cwd=str(REPO_ROOT), env=env, check=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        samples.append(result["seconds"])
        frameworks.update(result["frameworks"])
        numpy_loaded |= result["numpy"]
        modules = result["modules"]
    samples = samples[1:]
    return {"median_ms": 1e3 * statistics.median(samples), "min_ms": 1e3 * min(samples),
            "frameworks": sorted(frameworks), "numpy": numpy_loaded, "modules": modules}


# ---------------------------------------------------------------------- the task
def build_task(batches: int, seed: int = 0):
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset

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
        """Rows of pre-generated arrays as ``{"x": ..., "y": ...}`` samples (same for both loops)."""

        def __init__(self, x: Any, y: Any) -> None:
            self.x = torch.from_numpy(x)
            self.y = torch.from_numpy(y)

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
            return {"x": self.x[index], "y": self.y[index]}

    rng = np.random.default_rng(seed)
    n = batches * BATCH_SIZE
    dataset = DictDataset(rng.standard_normal((n, SIZES[0]), dtype=np.float32),
                          rng.integers(0, SIZES[-1], size=n, dtype=np.int64))

    def loader() -> DataLoader:
        return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False)

    def model_and_optimizer():
        torch.manual_seed(seed)  # every contender starts from the same weights
        model = MLP()
        return model, torch.optim.SGD(model.parameters(), lr=0.01)

    return loader, model_and_optimizer


def make_hand_epoch(loader, model, optimizer) -> Callable[[], None]:
    import torch
    cross_entropy = torch.nn.functional.cross_entropy

    def epoch() -> None:
        model.train()
        for batch in loader:
            loss = cross_entropy(model(batch["x"]), batch["y"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)  # what the torch driver does by default
    return epoch


def make_trainer_epoch(loader, model, optimizer, progress_bar, callbacks=()) -> tuple[Any, Callable[[], None]]:
    from fastcore_train import Trainer
    trainer = Trainer(model=model, train_dataloader=loader, optimizers=optimizer, driver="torch",
                      device="cpu", n_epochs=1, progress_bar=progress_bar, callbacks=list(callbacks))

    def epoch() -> None:
        trainer.state.cur_epoch_idx = 0  # one more epoch on the same Trainer; counters keep going
        trainer.run(num_eval_sanity_batch=0)
    return trainer, epoch


def timed(fn: Callable[[], None]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process) of ``fn()``, its prints discarded."""
    gc.collect()
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):  # the raw bar's lines
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - wall, time.process_time() - cpu


def same_weights(a, b) -> bool:
    import torch
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


# ---------------------------------------------------------------------- profile
def profile_trainer(epoch: Callable[[], None], batches: int, top: int = 25) -> None:
    """cProfile one Trainer epoch; per-batch microseconds by function (profiler overhead included)."""
    import cProfile
    import pstats

    import fastcore_train
    package_dir = str(Path(fastcore_train.__file__).resolve().parent)
    profiler = cProfile.Profile()
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        profiler.runcall(epoch)
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, name), (_, nc, tt, ct, _) in stats.stats.items():
        ours = filename.startswith(package_dir)
        rows.append((tt, ct, nc, f"{Path(filename).name}:{line}({name})", ours))
    print(f"\ncProfile of one Trainer epoch ({batches} batches), us per batch; "
          "profiler overhead inflates small Python calls:")
    print(f"  {'self':>8} {'cumul':>8} {'calls/b':>7}  function")
    for tt, ct, nc, label, ours in sorted(rows, reverse=True)[:top]:
        mark = "*" if ours else " "
        print(f"  {1e6 * tt / batches:8.1f} {1e6 * ct / batches:8.1f} {nc / batches:7.2f} {mark}{label}")
    package_rows = sorted((row for row in rows if row[4]), reverse=True)
    print("  fastcore_train functions:")
    for tt, ct, nc, label, _ in package_rows[:12]:
        print(f"  {1e6 * tt / batches:8.1f} {1e6 * ct / batches:8.1f} {nc / batches:7.2f} *{label}")
    own = sum(row[0] for row in package_rows)
    print(f"  (* = fastcore_train code; its self time totals {1e6 * own / batches:.1f} us/batch under the profiler)")


# ---------------------------------------------------------------------- main
def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved timed rounds (default 20)")
    parser.add_argument("--batches", type=int, default=300, help="batches per round = one epoch (default 300)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed warm-up epochs per contender (default 2)")
    parser.add_argument("--import-runs", type=int, default=5, help="fresh interpreters for the import time (default 5)")
    parser.add_argument("--profile", action="store_true", help="also cProfile one Trainer epoch")
    args = parser.parse_args(argv)
    for name in ("rounds", "batches", "threads", "import_runs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")

    # Import time first, before this process has loaded anything.
    imp = measure_import(args.import_runs)

    import torch
    torch.set_num_threads(args.threads)

    loader, model_and_optimizer = build_task(args.batches)
    hand_model, hand_opt = model_and_optimizer()
    control_model, control_opt = model_and_optimizer()
    bare_model, bare_opt = model_and_optimizer()
    raw_model, raw_opt = model_and_optimizer()
    rich_model, rich_opt = model_and_optimizer()
    logs_model, logs_opt = model_and_optimizer()
    hand_loader = loader()
    contenders: dict[str, Callable[[], None]] = {"hand": make_hand_epoch(hand_loader, hand_model, hand_opt)}
    # A second, independent hand loop: its ratio to "hand" is the noise floor of this machine.
    contenders["hand-again"] = make_hand_epoch(loader(), control_model, control_opt)
    bare_trainer, contenders["trainer"] = make_trainer_epoch(loader(), bare_model, bare_opt, None)
    raw_trainer, contenders["trainer+raw"] = make_trainer_epoch(loader(), raw_model, raw_opt, "raw")
    assert bare_trainer.callback_manager.callbacks == [], "progress_bar=None should leave no callback"
    assert [type(c).__name__ for c in raw_trainer.callback_manager.callbacks] == ["RawTextProgress"]
    _, contenders["trainer+rich"] = make_trainer_epoch(loader(), rich_model, rich_opt, "rich")
    others = [control_model, bare_model, raw_model, rich_model]
    if importlib.util.find_spec("tensorboardX") is not None:
        from fastcore_train import CSVLoggerCallback, TensorBoardCallback
        log_folder = tempfile.mkdtemp(prefix="fastcore_bench_logs_")
        _, contenders["trainer+logs"] = make_trainer_epoch(
            loader(), logs_model, logs_opt, "raw", [CSVLoggerCallback(log_folder), TensorBoardCallback(log_folder)])
        others.append(logs_model)

    for _ in range(args.warmup):
        for epoch in contenders.values():
            timed(epoch)
    # Same data, same start, same steps: the weights must agree bit for bit, else it is not a fair race.
    fair = all(same_weights(hand_model, model) for model in others)

    names = list(contenders)
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu_times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order.reverse()
        for name in order:
            wall, cpu = timed(contenders[name])
            times[name].append(wall)
            cpu_times[name].append(cpu)
    fair = fair and all(same_weights(hand_model, model) for model in others)

    ratio = [t / h for t, h in zip(times["trainer"], times["hand"])]
    control_ratio = [t / h for t, h in zip(times["hand-again"], times["hand"])]
    raw_ratio = [t / h for t, h in zip(times["trainer+raw"], times["hand"])]
    n_batches = args.batches

    print(f"fastcore_train overhead: MLP {'-'.join(map(str, SIZES))}, batch {BATCH_SIZE}, SGD, "
          f"{n_batches} batches/round, {args.rounds} rounds, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, python {sys.version.split()[0]}")
    print(f"identical weights after training (fair race): {'yes' if fair else 'NO'}; "
          f"hand loader's batch sampler: {type(getattr(hand_loader, 'batch_sampler', None)).__name__}, "
          f"Trainer's: {type(getattr(bare_trainer.dataloader, 'batch_sampler', None)).__name__}")
    print()
    print(f"  {'contender':<12} {'median ms/round':>16} {'min ms/round':>13} {'us/batch':>9} {'vs hand':>8} "
          f"{'cpu vs hand':>12}")
    hand_med = statistics.median(times["hand"])
    for name in names:
        med = statistics.median(times[name])
        cpu = statistics.median([c / h for c, h in zip(cpu_times[name], cpu_times["hand"])])
        print(f"  {name:<12} {1e3 * med:16.1f} {1e3 * min(times[name]):13.1f} "
              f"{1e6 * med / n_batches:9.1f} {med / hand_med:8.3f} {cpu:12.3f}")
    print("  (vs hand: ratio of median wall times; cpu vs hand: median per-round ratio of process CPU time,\n"
          "   which other processes on the machine disturb less)")
    print()
    extra = 1e6 * (statistics.median(times["trainer"]) - hand_med) / n_batches
    extra_raw = 1e6 * (statistics.median(times["trainer+raw"]) - hand_med) / n_batches
    print(f"  per-round ratio hand-again/hand:  median {statistics.median(control_ratio):.3f}  "
          f"min {min(control_ratio):.3f}  max {max(control_ratio):.3f}  (A/A control: the noise floor)")
    print(f"  per-round ratio trainer/hand:     median {statistics.median(ratio):.3f}  "
          f"min {min(ratio):.3f}  max {max(ratio):.3f}  (~{extra:+.1f} us/batch)")
    print(f"  per-round ratio trainer+raw/hand: median {statistics.median(raw_ratio):.3f}  "
          f"min {min(raw_ratio):.3f}  max {max(raw_ratio):.3f}  (~{extra_raw:+.1f} us/batch)")
    for name in ("trainer+rich", "trainer+logs"):
        if name in times:
            per_round = [t / h for t, h in zip(times[name], times["hand"])]
            extra_name = 1e6 * (statistics.median(times[name]) - hand_med) / n_batches
            print(f"  per-round ratio {name + '/hand:':<17} median {statistics.median(per_round):.3f}  "
                  f"min {min(per_round):.3f}  max {max(per_round):.3f}  (~{extra_name:+.1f} us/batch)")
    print()
    loaded = ", ".join(imp["frameworks"]) or "none"
    print(f"import fastcore_train: median {imp['median_ms']:.1f} ms, min {imp['min_ms']:.1f} ms "
          f"over {args.import_runs} fresh interpreters; {imp['modules']} modules in sys.modules; "
          f"frameworks loaded: {loaded} -> {'OK' if not imp['frameworks'] else 'FAIL'}"
          f"{'' if not imp['numpy'] else ' (numpy loaded)'}")

    if args.profile:
        profile_trainer(contenders["trainer"], n_batches)

    median_ratio = statistics.median(ratio)
    median_raw = statistics.median(raw_ratio)
    print()
    print(f"overhead ratio with progress_bar='raw' (median of {args.rounds} rounds): {median_raw:.3f}  "
          f"target <= {TARGET:.2f}  {'PASS' if median_raw <= TARGET else 'MISS'}")
    print(f"overhead ratio (median of {args.rounds} rounds): {median_ratio:.3f}  target <= {TARGET:.2f}  "
          f"{'PASS' if median_ratio <= TARGET else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
