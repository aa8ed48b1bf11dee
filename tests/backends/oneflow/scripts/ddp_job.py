"""A oneflow data-parallel job for the DDP tests, run as a real script: self-launched (a device
list) or under ``python -m oneflow.distributed.launch``.

Usage: python ddp_job.py CONFIG_JSON. Each rank writes ``<out>/rank_<r>.npz`` (final weights) and
``<out>/rank_<r>.json`` (samples it trained on, evaluation results, counters, no_sync probe).
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import oneflow as flow  # noqa: E402  (imported at the top, as users do: the self-launch must cope)

from fastcore_train import Accuracy, Callback, Event, GradClipCallback, Trainer  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.oneflow import Harness  # noqa: E402


class Fail(Callback):
    def __init__(self, rank, at):
        self.rank, self.at = rank, at

    def on_train_batch_end(self, trainer):
        if trainer.driver.rank == self.rank and trainer.global_forward_batches == self.at:
            raise RuntimeError(f"rank {self.rank} fails on purpose")


def no_sync_probe(trainer, x, y):
    """Gradients after a backward inside no_sync: each rank's own (not averaged)."""
    driver = trainer.driver
    fn, _ = driver.get_model_call_fn("train_step")
    rank = driver.rank
    xs, ys = flow.from_numpy(x[rank * 4:(rank + 1) * 4]), flow.from_numpy(y[rank * 4:(rank + 1) * 4])
    driver.zero_grad()
    with driver.no_sync():
        driver.backward(fn(xs, ys)["loss"])
    local = driver.unwrap_model().fc1.weight.grad.numpy().copy()
    driver.zero_grad()
    return local


def main(config):
    harness = Harness()
    out = Path(config["out"])
    x, y = make_data(config.get("samples", 64), seed=4)
    model = harness.make_model(initial_weights())
    if config.get("announce"):
        print("TRAINING", flush=True)
    callbacks = [Fail(config["fail_rank"], config.get("fail_at", 2))] if "fail_rank" in config else []
    if "grad_clip" in config:
        callbacks.append(GradClipCallback(**config["grad_clip"]))
    evaluate = {}
    if config.get("evaluate"):
        ex, ey = make_data(config["evaluate"], seed=9)
        evaluate = dict(evaluate_dataloaders={"dev": harness.make_dataloader(ex, ey, 5)},
                        metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"})
    trainer = Trainer(model, harness.make_dataloader(x, y, config.get("batch_size", 8),
                                                     shuffle=config.get("shuffle", False), with_index=True),
                      harness.make_sgd(model, 0.1), driver="oneflow", device=config.get("device"),
                      n_epochs=config.get("n_epochs", 1), progress_bar=None, callbacks=callbacks,
                      accumulation_steps=config.get("accumulation_steps", 1), **evaluate)
    seen = []
    trainer.add_callback_fn(Event.on_train_batch_begin(), lambda t, batch, i: seen.extend(harness.indices_of(batch)))
    trainer.run(num_eval_sanity_batch=0)
    rank = trainer.driver.rank
    probe = None
    if config.get("probe_no_sync"):
        probe = no_sync_probe(trainer, x, y).tolist()
    gathered = trainer.driver.all_gather_object({"rank": rank, "text": "x" * (rank + 3)})
    broadcast = trainer.driver.broadcast_object(f"from {rank}", src=1)
    trainer.driver.barrier()
    np.savez(out / f"rank_{rank}.npz", **harness.get_weights(trainer.driver.unwrap_model()))
    results = trainer.evaluator.run() if trainer.evaluator is not None else {}
    (out / f"rank_{rank}.json").write_text(json.dumps({
        "seen": seen, "results": results, "world_size": trainer.driver.world_size, "probe": probe,
        "gathered": gathered, "broadcast": broadcast,
        "global_forward_batches": trainer.global_forward_batches, "driver": type(trainer.driver).__name__}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
