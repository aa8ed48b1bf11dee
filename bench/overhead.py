"""Per-batch overhead and peak memory of the fastcore_train Trainer against each framework's own hand loop.

For ``--backend`` torch, paddle, jittor or oneflow: trains the same MLP (64-256-256-10, SGD lr
0.01, batch 32) on the same pre-generated data, through that framework's own loader
(``bench/hands/<backend>.py``), from the same initial weights, once with ``Trainer.run`` and once
with the framework's idiomatic ``forward / loss / backward / step / zero_grad`` loop, in one
process. Rounds are interleaved (the order rotating each round) so drift in machine speed hits
every contender alike; each round is one epoch of ``--batches`` batches.

Reported:

* ``hand-again / hand``: a second, independent hand loop (own model, own loader); an A/A
  control whose spread shows how much of the other ratios is machine noise.
* ``trainer / hand``: Trainer built with ``progress_bar=None`` (its default NaN guard on); the number the
  target applies to.
* ``trainer+raw / hand``: Trainer built with ``progress_bar="raw"`` (what the default ``"auto"``
  resolves to when stdout is not a terminal); shows what the progress display costs.
* ``trainer+rich / hand``: the rich bar (what ``"auto"`` picks in a terminal), rendered to
  /dev/null.
* ``trainer+logs / hand``: the raw bar plus CSV and TensorBoard metric logs (loss every 50
  batches, the default), written to a temporary folder; skipped when tensorboardX is missing.
* whether every contender ended with bit-identical weights (a fair race);
* peak RSS of a whole training run (``--rss-epochs`` epochs, fresh process each, ``--rss-runs``
  times interleaved) of the Trainer against the hand loop;
* ``import fastcore_train`` in a fresh interpreter (median of ``--import-runs`` runs), and whether
  it loaded any framework (torch, paddle, jittor, oneflow must stay unloaded).

It is a measurement, not a test: it always exits 0 and prints PASS or MISS against the targets.

    python bench/overhead.py [--backend torch] [--rounds 20] [--batches 300] [--threads 1] [--profile]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import _rounds  # noqa: E402
from bench.hands import BACKENDS, BATCH_SIZE, SIZES  # noqa: E402

TARGET = 1.03
RSS_TARGET = 1.05
FRAMEWORKS = BACKENDS
# jittor's settings for a CPU-only machine (see /work/shared/ENVIRONMENT.md); the caller's win.
_JITTOR_ENV = {"use_mkl": "0", "nvcc_path": "", "FIX_TORCH_ERROR": "0", "log_silent": "1"}


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



def make_trainer_epoch(hands: Any, loader: Any, model: Any, optimizer: Any, progress_bar: Any,
                       callbacks: Any = (), **options: Any) -> tuple[Any, Callable[[], None]]:
    from fastcore_train import Trainer
    trainer = Trainer(model=model, train_dataloader=loader, optimizers=optimizer, n_epochs=1,
                      progress_bar=progress_bar, callbacks=list(callbacks), **hands.TRAINER_KWARGS, **options)

    def epoch() -> None:
        trainer.state.cur_epoch_idx = 0  # one more epoch on the same Trainer; counters keep going
        trainer.run(num_eval_sanity_batch=0)
    return trainer, epoch


def same_weights(hands: Any, a: Any, b: Any) -> bool:
    import numpy as np
    return all(np.array_equal(p, q) for p, q in zip(hands.weights(a), hands.weights(b)))


def set_thread_env(backend: str, threads: int) -> None:
    """Thread counts and framework settings that must be in place before the framework is imported."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)
    if backend == "jittor":
        for name, value in _JITTOR_ENV.items():
            os.environ.setdefault(name, value)


# ---------------------------------------------------------------------- peak RSS
def rss_worker(backend: str, contender: str, batches: int, epochs: int, threads: int) -> int:
    """One whole training run (hand loop or Trainer) in this fresh process; prints its peak RSS."""
    from bench.hands import load
    hands = load(backend)
    hands.configure(threads)
    loader, model_and_optimizer = hands.build_task(batches)
    model, optimizer = model_and_optimizer()
    if contender == "hand":
        epoch = hands.hand_epoch(loader(), model, optimizer)
        for _ in range(epochs):
            epoch()
    else:
        from fastcore_train import Trainer
        Trainer(model=model, train_dataloader=loader(), optimizers=optimizer, n_epochs=epochs, progress_bar=None,
                **hands.TRAINER_KWARGS).run(num_eval_sanity_batch=0)
    hands.finish()
    _rounds.report_rss()
    return 0


def measure_peak_rss(args: argparse.Namespace) -> dict[str, list[float]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))

    def argv_for(name: str) -> list[str]:
        return [str(Path(__file__).resolve()), "--backend", args.backend, "--rss-worker", name,
                "--batches", str(args.batches), "--rss-epochs", str(args.rss_epochs), "--threads", str(args.threads)]
    return _rounds.measure_rss(argv_for, ["hand", "trainer"], args.rss_runs, env)


# ---------------------------------------------------------------------- profile
def profile_trainer(epoch: Callable[[], None], batches: int, top: int = 25) -> None:
    """cProfile one Trainer epoch; per-batch microseconds by function (profiler overhead included)."""
    import cProfile
    import contextlib
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
def parse_args(argv: Any) -> argparse.Namespace:
    parser = _rounds.bench_parser(__doc__.split("\n\n")[0], BACKENDS, rounds=20)
    parser.add_argument("--batches", type=int, default=300, help="batches per round = one epoch (default 300)")
    parser.add_argument("--threads", type=int, default=1, help="framework compute threads (default 1)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed warm-up epochs per contender (default 2)")
    parser.add_argument("--import-runs", type=int, default=5, help="fresh interpreters for the import time (default 5)")
    parser.add_argument("--rss-runs", type=int, default=3,
                        help="fresh processes per side for peak RSS, 0 to skip (default 3)")
    parser.add_argument("--rss-epochs", type=int, default=3, help="epochs of each peak-RSS run (default 3)")
    parser.add_argument("--profile", action="store_true", help="also cProfile one Trainer epoch")
    parser.add_argument("--rss-worker", choices=("hand", "trainer"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _rounds.require_at_least(parser, args, 1, ("rounds", "batches", "threads", "import_runs", "rss_epochs"))
    _rounds.require_at_least(parser, args, 0, ("warmup", "rss_runs"))
    return args


def main(argv: Any = None) -> int:
    args = parse_args(argv)
    set_thread_env(args.backend, args.threads)
    if args.rss_worker:
        return rss_worker(args.backend, args.rss_worker, args.batches, args.rss_epochs, args.threads)

    # Import time and peak RSS first, in fresh processes, before this one has loaded a framework.
    imp = measure_import(args.import_runs)
    peaks = measure_peak_rss(args) if args.rss_runs else {}

    from bench.hands import load
    hands = load(args.backend)
    hands.configure(args.threads)
    loader, model_and_optimizer = hands.build_task(args.batches)
    extra_trainers: dict[str, dict[str, Any]] = getattr(hands, "EXTRA_TRAINERS", {})
    models = {name: model_and_optimizer() for name in ("hand", "hand-again", "trainer", "trainer+raw",
                                                      "trainer+rich", "trainer+logs", *extra_trainers)}
    hand_loader = loader()
    contenders: dict[str, Callable[[], None]] = {"hand": hands.hand_epoch(hand_loader, *models["hand"])}
    # A second, independent hand loop: its ratio to "hand" is the noise floor of this machine.
    contenders["hand-again"] = hands.hand_epoch(loader(), *models["hand-again"])
    bare_trainer, contenders["trainer"] = make_trainer_epoch(hands, loader(), *models["trainer"], None)
    raw_trainer, contenders["trainer+raw"] = make_trainer_epoch(hands, loader(), *models["trainer+raw"], "raw")
    # What a user gets by default beside the bar: the NaN guard (a finiteness check every 50 batches;
    # none on jittor, where a read changes the lazy graph's rounding).
    guard = [] if bare_trainer.driver.data.reading_changes_results else ["NanGuardCallback"]
    assert [type(c).__name__ for c in bare_trainer.callback_manager.callbacks] == guard, \
        "progress_bar=None should leave only the default NaN guard"
    assert [type(c).__name__ for c in raw_trainer.callback_manager.callbacks] == [*guard, "RawTextProgress"]
    _, contenders["trainer+rich"] = make_trainer_epoch(hands, loader(), *models["trainer+rich"], "rich")
    for name, kwargs in extra_trainers.items():  # backend options worth a line of their own
        _, contenders[name] = make_trainer_epoch(hands, loader(), *models[name], None, **kwargs)
    log_folder = None
    if importlib.util.find_spec("tensorboardX") is not None:
        from fastcore_train import CSVLoggerCallback, TensorBoardCallback
        log_folder = tempfile.mkdtemp(prefix="fastcore_bench_logs_")
        _, contenders["trainer+logs"] = make_trainer_epoch(
            hands, loader(), *models["trainer+logs"], "raw",
            [CSVLoggerCallback(log_folder), TensorBoardCallback(log_folder)])

    try:
        walls, cpus, threads = _rounds.interleave(contenders, args.rounds, args.warmup, hands.finish)
    finally:
        if log_folder is not None:
            shutil.rmtree(log_folder, ignore_errors=True)
    # Same data, same start, same steps: the weights must agree bit for bit, else it is not a fair race.
    unequal = [name for name in contenders if not same_weights(hands, models["hand"][0], models[name][0])]
    fair = "trainer" not in unequal and "hand-again" not in unequal
    note = getattr(hands, "ROUNDING_NOTE", "")
    batches = args.batches

    print(f"fastcore_train overhead ({args.backend}): MLP {'-'.join(map(str, SIZES))}, batch {BATCH_SIZE}, SGD, "
          f"{batches} batches/round, {args.rounds} rounds, {args.backend} {hands.version()}, "
          f"threads {args.threads}, python {sys.version.split()[0]}")
    print(f"identical weights after training (fair race): {'yes' if fair else 'NO'}"
          f"{'; differ from hand: ' + ', '.join(unequal) if unequal else ''}{' (' + note + ')' if unequal and note else ''}; "
          f"hand loader: {type(hand_loader).__name__} "
          f"(batch sampler {type(getattr(hand_loader, 'batch_sampler', None)).__name__}), "
          f"Trainer's batch sampler: {type(getattr(bare_trainer.dataloader, 'batch_sampler', None)).__name__}")
    print()
    _rounds.print_table(walls, cpus, batches, threads=threads)
    print()
    control = _rounds.ratio_line("hand-again", walls, batches, note="(A/A control: the noise floor)")
    ratio = _rounds.ratio_line("trainer", walls, batches)
    for name in ("trainer+raw", "trainer+rich", "trainer+logs", *extra_trainers):
        if name in walls:
            _rounds.ratio_line(name, walls, batches)
    raw_ratio = statistics.median(_rounds.per_round(walls["trainer+raw"], walls["hand"]))
    print()
    rss_ratio = None
    if peaks:
        hand_rss, trainer_rss = statistics.median(peaks["hand"]), statistics.median(peaks["trainer"])
        rss_ratio = trainer_rss / hand_rss
        print(f"peak RSS of a {args.rss_epochs}-epoch run (median of {args.rss_runs} fresh processes each): "
              f"hand {hand_rss:.1f} MiB, trainer {trainer_rss:.1f} MiB, "
              f"{trainer_rss - hand_rss:+.1f} MiB ({100 * (rss_ratio - 1):+.1f}%); "
              f"runs: hand {', '.join(f'{p:.1f}' for p in peaks['hand'])}; "
              f"trainer {', '.join(f'{p:.1f}' for p in peaks['trainer'])}")
    loaded = ", ".join(imp["frameworks"]) or "none"
    print(f"import fastcore_train: median {imp['median_ms']:.1f} ms, min {imp['min_ms']:.1f} ms "
          f"over {args.import_runs} fresh interpreters; {imp['modules']} modules in sys.modules; "
          f"frameworks loaded: {loaded} -> {'OK' if not imp['frameworks'] else 'FAIL'}"
          f"{'' if not imp['numpy'] else ' (numpy loaded)'}")

    if args.profile:
        profile_trainer(contenders["trainer"], batches)

    print()
    print(f"A/A control hand-again/hand (median of {args.rounds} rounds): {control:.3f}")
    print(f"overhead ratio with progress_bar='raw' (median of {args.rounds} rounds): {raw_ratio:.3f}  "
          f"target <= {TARGET:.2f}  {'PASS' if raw_ratio <= TARGET else 'MISS'}")
    print(f"overhead ratio (median of {args.rounds} rounds): {ratio:.3f}  target <= {TARGET:.2f}  "
          f"{'PASS' if ratio <= TARGET else 'MISS'}")
    if rss_ratio is not None:
        print(f"peak RSS ratio trainer/hand: {rss_ratio:.3f}  target <= {RSS_TARGET:.2f}  "
              f"{'PASS' if rss_ratio <= RSS_TARGET else 'MISS'}")
    print(f"bit-identical weights (trainer vs hand): {'yes' if fair else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
