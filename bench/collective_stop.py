"""What the collective stop decision costs a data-parallel step: 2 ranks on CPU, with it and without it.

In data parallel the Trainer ORs every rank's stop and SIGTERM requests once per optimizer step
(``driver.comm.any_rank``: one small all-reduce) and marks the step in the ranks' shared
heartbeat table (:mod:`fastcore_train.parallel.watchdog`). This script trains the demo MLP
(digits, hidden 128, batch 32 per rank: a small step, where a fixed cost shows most) with
``device=["cpu", "cpu"]`` (rank 0 self-launches rank 1), ``--epochs`` per round, alternating rounds
with the decision and rounds where it is replaced by the local flag (no all-reduce). Rank 0
stamps every ``on_train_batch_end``; a round's time is its mean step (the exchange happens on some
steps only, which a median would hide). Reported: the median over rounds of the "with" and the
"without" mean step, and their ratio (the overhead of the decision).

It is a measurement, not a test: it always exits 0.

    .venv/bin/python bench/collective_stop.py [--driver torch] [--rounds 10] [--epochs 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from fastcore_train import Event, Trainer  # noqa: E402
from fastcore_train.controllers.run_guard import RunGuard  # noqa: E402
from fastcore_train.data import load_digits  # noqa: E402
from fastcore_train.drivers.registry import backend_for_driver_name, load_backend  # noqa: E402


def local_decision(guard: RunGuard, requested: bool, batch: int) -> bool:
    """The "without" arm: each rank's own flag, no all-reduce and no heartbeat."""
    return requested


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--driver", default="torch", choices=["torch", "paddle", "jittor", "oneflow"])
    parser.add_argument("--rounds", type=int, default=10, help="rounds per arm (default 10)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs per round (default 5)")
    args = parser.parse_args()

    backend = load_backend(backend_for_driver_name(args.driver))
    batch_size = 64 if args.driver == "jittor" else 32  # jittor's batch_size is the global batch under MPI
    task = backend.build_demo(load_digits(), hidden=128, lr=1e-3, batch_size=batch_size, seed=0)
    trainer = Trainer(task.model, task.train_dataloader, task.optimizer, driver=args.driver, device=["cpu", "cpu"],
                      n_epochs=args.epochs, progress_bar=None)
    stamps: list[float] = []
    trainer.add_callback_fn(Event.on_train_batch_end(), lambda t: stamps.append(time.perf_counter()))
    collective = RunGuard.decide_stop_after_step
    medians: dict[str, list[float]] = {"with": [], "without": []}
    for round_index in range(2 * args.rounds + 2):  # the first two rounds warm up
        arm = "with" if round_index % 2 == 0 else "without"
        RunGuard.decide_stop_after_step = collective if arm == "with" else local_decision  # type: ignore[method-assign]
        stamps.clear()
        trainer.state.cur_epoch_idx = 0
        trainer.run(num_eval_sanity_batch=0)
        if round_index >= 2:
            medians[arm].append((stamps[-1] - stamps[0]) / (len(stamps) - 1))  # mean step: exchanges are rare
    RunGuard.decide_stop_after_step = collective  # type: ignore[method-assign]
    if trainer.driver.comm.is_global_zero():
        with_step, without_step = statistics.median(medians["with"]), statistics.median(medians["without"])
        print(f"driver={args.driver}, 2 ranks on CPU, {len(stamps)} steps per round ({args.epochs} epochs), "
              f"{args.rounds} rounds per arm")
        print(f"mean step with the collective stop decision:    {with_step * 1e6:8.1f} us")
        print(f"mean step without it (each rank's own flag):     {without_step * 1e6:8.1f} us")
        print(f"overhead ratio with / without: {with_step / without_step:.3f}")


if __name__ == "__main__":
    main()
