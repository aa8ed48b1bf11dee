"""A data-parallel jittor job for the MPI tests, run as a real script: under ``mpirun -np N``,
self-launched from a plain ``python mpi_job.py`` with a device list, or as one plain process.

Usage: python mpi_job.py CONFIG_JSON. Each rank writes ``<out>/rank_<r>.npz`` (final weights)
and ``<out>/rank_<r>.json`` (samples it trained on, evaluation results, events, counters).
``batch_size`` is the global batch (jittor's meaning under MPI).
"""
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fastcore_train import Accuracy, Callback, Event, GradClipCallback, Trainer  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.jittor import Harness  # noqa: E402


class Fail(Callback):
    def __init__(self, rank, at):
        self.rank, self.at = rank, at

    def on_train_batch_end(self, trainer):
        if trainer.driver.rank == self.rank and trainer.global_forward_batches == self.at:
            raise RuntimeError(f"rank {self.rank} fails on purpose")


class SaveAndStop(Callback):
    def __init__(self, at, folder):
        self.at, self.folder = at, folder

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            trainer.save_checkpoint(self.folder)
            trainer.stop_training()


class Slow(Callback):
    def on_train_batch_end(self, trainer):
        time.sleep(0.05)


def main(config):
    harness = Harness()
    out = Path(config["out"])
    x, y = make_data(config.get("samples", 64), seed=4)
    # Each rank starts from other weights: the driver must give every rank rank 0's.
    model = harness.make_model(initial_weights(seed=int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))))
    optimizer = harness.make_sgd(model, 0.1)
    callbacks = []
    if "fail_rank" in config:
        callbacks.append(Fail(config["fail_rank"], config.get("fail_at", 2)))
    if "save_at" in config:
        callbacks.append(SaveAndStop(config["save_at"], config["save_to"]))
    if config.get("slow"):
        callbacks.append(Slow())
    if "grad_clip" in config:
        callbacks.append(GradClipCallback(**config["grad_clip"]))
    evaluate = {}
    if config.get("evaluate"):
        ex, ey = make_data(config["evaluate"], seed=9)
        evaluate = dict(evaluate_dataloaders={"dev": harness.make_dataloader(ex, ey, 5)},
                        metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"})
    train = harness.make_dataloader(x, y, config.get("batch_size", 16), shuffle=config.get("shuffle", False),
                                    with_index=True)
    trainer = Trainer(model, train, optimizer, driver="jittor", device=config.get("device"),
                      n_epochs=config.get("n_epochs", 1), progress_bar=None, callbacks=callbacks,
                      accumulation_steps=config.get("accumulation_steps", 1), **evaluate)
    seen, events = [], []
    trainer.add_callback_fn(Event.on_train_batch_begin(), lambda t, batch, i: seen.extend(harness.indices_of(batch)))
    for name in ("on_train_begin", "on_train_epoch_begin", "on_train_batch_begin", "on_after_optimizers_step",
                 "on_train_batch_end", "on_train_epoch_end", "on_evaluate_end", "on_train_end"):
        trainer.add_callback_fn(getattr(Event, name)(), lambda t, *args, _name=name: events.append(_name))
    if config.get("announce") and trainer.driver.rank == 0:
        print("TRAINING", flush=True)
    trainer.run(num_eval_sanity_batch=0, resume_from=config.get("resume_from"))
    rank = trainer.driver.rank
    round_trip = None
    if config.get("save_model"):
        trainer.save_model(config["save_model"])
        fresh = harness.make_model(initial_weights(seed=11))
        loader = Trainer(fresh, harness.make_dataloader(x, y, 16), harness.make_sgd(fresh, 0.1), driver="jittor",
                         device=config.get("device"), progress_bar=None)
        loader.load_model(config["save_model"])
        round_trip = bool(np.array_equal(harness.predict(fresh, x), harness.predict(trainer.model, x)))
    np.savez(out / f"rank_{rank}.npz", **harness.get_weights(trainer.model))
    results = trainer.evaluator.run() if trainer.evaluator is not None else {}
    (out / f"rank_{rank}.json").write_text(json.dumps({
        "seen": seen, "results": results, "world_size": trainer.driver.world_size, "events": events,
        "round_trip": round_trip, "global_forward_batches": trainer.global_forward_batches,
        "driver": type(trainer.driver).__name__}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
