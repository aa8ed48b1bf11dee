"""The 2-rank predictions job, the same for every backend: python predict_job.py CONFIG_JSON.

Predicts ``samples`` samples (37: the ranks get unequal shares) from a shuffling dataloader, in
memory and streamed to ``<out>/shards``, and evaluates a metric function (in both forms:
``fn(preds, labels)`` and transformers' ``compute_metrics(eval_pred)``) and the evaluation loss of
``train_step``; each rank writes ``<out>/rank_<r>.npz`` (its predictions) and ``rank_<r>.json``
(its results).
"""
import importlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script; a pool rank has it already
    sys.path.insert(0, str(ROOT))

from fastcore_train import EvalPrediction, Evaluator, Trainer  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.distributed.launchers import BACKENDS  # noqa: E402


def labels_seen(preds, labels):
    """A metric function whose result shows the order and count of the labels it was given."""
    return {"n": len(labels), "checksum": int(sum((i + 1) * int(label) for i, label in enumerate(labels)))}


def labels_seen_hf(eval_pred):
    """The same, in transformers' one-argument form."""
    assert isinstance(eval_pred, EvalPrediction) and eval_pred.inputs is None
    predictions, labels = eval_pred
    return labels_seen(predictions, labels)


class BatchesSeen:
    """A plain metric reading the loss, so the evaluation of train_step has a metric."""

    def __init__(self):
        self.batches = 0

    def update(self, loss):
        self.batches += 1

    def reset(self):
        self.batches = 0

    def get_metric(self):
        return {}


def main(config):
    backend = BACKENDS[config["backend"]]
    harness = importlib.import_module(f"tests.conformance.harnesses.{backend.name}").Harness()
    x, y = make_data(config["samples"], seed=9)
    batch_size = 5 * (config["world_size"] if backend.global_batch_size else 1)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, batch_size), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, device=config["device"], n_epochs=1, progress_bar=None,
                      evaluate_dataloaders=harness.make_dataloader(x, y, batch_size),
                      metrics={"seen": labels_seen, "hf": labels_seen_hf}, evaluate_input_mapping={"y": "target"})
    rank = trainer.driver.comm.rank
    predictions = trainer.predict(harness.make_dataloader(x, y, batch_size, shuffle=True))
    shards = trainer.predict(harness.make_dataloader(x, y, batch_size, shuffle=True),
                             output_dir=Path(config["out"], "shards"))
    results = trainer.evaluator.run()
    loss_results = Evaluator(model, harness.make_dataloader(x, y, batch_size), metrics={"seen": BatchesSeen()},
                             driver=trainer.driver, evaluate_fn="train_step", verbose=0).run()
    np.savez(Path(config["out"], f"rank_{rank}.npz"), pred=predictions["pred"], streamed=shards.load()["pred"])
    Path(config["out"], f"rank_{rank}.json").write_text(json.dumps({
        "world_size": trainer.driver.comm.world_size, "results": results, "loss_results": loss_results,
        "own_shards": len(list(Path(config["out"], "shards").glob(f"predictions-rank{rank:05d}-*.npz")))}))
    trainer.driver.comm.barrier()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
