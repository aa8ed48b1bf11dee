"""Jittor's loader workers: the Trainer against jittor's own loop, on a data-bound run.

The data-bound workload of ``bench/models.py`` (``--model loader``: ~1 ms of numpy per sample in
the dataset's ``__getitem__``, a small MLP), or with ``--sleep-ms`` a dataset that also sleeps per
sample (reading from slow storage). Contenders, interleaved in the same process
(``bench/_rounds.py``), one epoch of ``--batches`` batches of 32 per round:

| contender    | what runs |
|--------------|-----------|
| `hand`       | jittor's own loop over a jittor Dataset with ``num_workers=--workers`` (jittor's workers) |
| `trainer`    | ``Trainer(...).run()`` on a Dataset with the same ``num_workers`` (the Trainer's workers) |
| `hand-kept`  | jittor's own loop over one Dataset kept across rounds (its workers persist and preload) |
| `hand@0`     | jittor's own loop, ``num_workers=0`` (every sample read in the training process) |
| `trainer@0`  | the Trainer, ``num_workers=0`` |

Each round starts workers afresh on both sides: ``hand`` iterates a new Dataset and terminates its
workers after the epoch (kept, jittor's workers start loading the next epoch while the other
contenders run, and a later round then costs almost nothing: ``hand-kept`` shows that); the Trainer starts its workers with
each ``run()`` and stops them when it returns. Reported: the table, ``trainer/hand`` (with
workers, against the 1.03 target), and what the workers buy each side (``hand@0/hand``,
``trainer@0/trainer``). A measurement, not a test: exit status 0.

    python bench/jittor_workers.py [--workers 2] [--batches 20] [--rounds 5] [--sleep-ms 0]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import _rounds  # noqa: E402
from bench.hands import workloads  # noqa: E402
from bench.overhead import TARGET, make_trainer_epoch, set_thread_env  # noqa: E402

SEED = 0


class Slowed:
    """The workload's per-sample work, plus ``sleep_ms`` of waiting (picklable for the workers)."""

    def __init__(self, transform: Callable, sleep_ms: float) -> None:
        self.transform, self.sleep_ms = transform, sleep_ms

    def __call__(self, sample: dict, index: int) -> dict:
        if self.sleep_ms:
            time.sleep(self.sleep_ms / 1e3)
        return self.transform(sample, index)


def contenders(hands: Any, args: argparse.Namespace) -> tuple[dict[str, Callable[[], None]], dict[str, Any]]:
    workload = workloads.get("loader")
    columns = workloads.columns(workload, args.batches, SEED)
    transform = Slowed(workload.transform, args.sleep_ms)
    models: dict[str, Any] = {}

    def model_and_optimizer(name: str) -> tuple[Any, Any]:
        model = hands.build_model(workload, SEED)
        models[name] = model
        return model, hands.make_optimizer(workload.optimizer, model, workload.lr)

    def dataset(workers: int) -> Any:
        return hands.DictDataset(columns, transform, batch_size=workload.batch_size, num_workers=workers)

    def hand(name: str, workers: int) -> Callable[[], None]:
        model, optimizer = model_and_optimizer(name)

        def epoch() -> None:
            loader = dataset(workers)
            hands.hand_epoch(loader, model, optimizer, workload.loss, workload.keys)()
            hands.finish()
            loader.terminate()  # fresh workers each round, as the Trainer's
        return epoch

    def hand_kept(name: str, workers: int) -> Callable[[], None]:
        model, optimizer = model_and_optimizer(name)
        return hands.hand_epoch(dataset(workers), model, optimizer, workload.loss, workload.keys)

    def trainer(name: str, workers: int) -> Callable[[], None]:
        model, optimizer = model_and_optimizer(name)
        return make_trainer_epoch(hands, dataset(workers), model, optimizer, None, model_summary=False)[1]

    epochs = {"hand": hand("hand", args.workers), "trainer": trainer("trainer", args.workers),
              "hand-kept": hand_kept("hand-kept", args.workers),
              "hand@0": hand("hand@0", 0), "trainer@0": trainer("trainer@0", 0)}
    return epochs, models


def main(argv: Any = None) -> int:
    parser = _rounds.bench_parser(__doc__.splitlines()[0], ("jittor",), rounds=5)
    parser.add_argument("--workers", type=int, default=2, help="loader workers (default 2)")
    parser.add_argument("--batches", type=int, default=20, help="batches of 32 per epoch (default 20)")
    parser.add_argument("--sleep-ms", type=float, default=0.0, help="extra wait per sample, ms (default 0)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="compute threads (default 1)")
    args = parser.parse_args(argv)
    _rounds.require_at_least(parser, args, 1, ("workers", "batches", "rounds"))
    set_thread_env("jittor", args.threads)
    from bench.hands import jittor as hands

    hands.configure(args.threads)
    print(f"jittor {hands.version()}: data-bound MLP, {args.batches} batches of 32, "
          f"{workloads.per_sample_ms(workloads.get('loader')):.2f} ms of numpy + {args.sleep_ms:g} ms of sleep per "
          f"sample, {args.workers} workers, {os.cpu_count()} cores, {args.rounds} rounds (+{args.warmup} warm-up)")
    epochs, models = contenders(hands, args)
    walls, cpus, threads = _rounds.interleave(epochs, args.rounds, args.warmup, hands.finish)
    _rounds.print_table(walls, cpus, args.batches, threads=threads)
    ratio = _rounds.ratio_line("trainer", walls, args.batches)
    _rounds.ratio_line("trainer", walls, args.batches, base="hand-kept",
                       note="(against jittor's workers kept between rounds: they load ahead while others run)")
    print(f"  trainer/hand with {args.workers} workers: {ratio:.3f} "
          f"({'PASS' if ratio <= TARGET else 'MISS'} against {TARGET})")
    for side in ("hand", "trainer"):
        speedup = statistics.median(_rounds.per_round(walls[f"{side}@0"], walls[side]))
        print(f"  {side}: {args.workers} workers are {speedup:.2f}x as fast as none ({side}@0/{side} per round)")
    same = all(statistics.fmean(abs(a - b).ravel()) == 0 for a, b in
               zip(hands.weights(models["trainer"]), hands.weights(models["trainer@0"])))
    print(f"  Trainer's weights with workers and without: {'identical' if same else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
