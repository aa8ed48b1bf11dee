"""Data-parallel evaluation where some ranks' shares (or every rank's) are empty.

Usage: python empty_evaluation_job.py CONFIG_JSON (``backend``, ``out``, ``device``, ``world_size``).
Each rank writes ``<out>/rank_<r>.json``: its results and the dataloaders that gave no data.
"""
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script; a pool rank has it already
    sys.path.insert(0, str(ROOT))

from fastcore_train import Accuracy, Evaluator  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.distributed.launchers import BACKENDS  # noqa: E402


def main(config):
    backend = BACKENDS[config["backend"]]
    harness = importlib.import_module(f"tests.conformance.harnesses.{backend.name}").Harness()
    batch_size = 2 * (config["world_size"] if backend.global_batch_size else 1)
    x, y = make_data(6, seed=9)
    dataloaders = {"dev": harness.make_dataloader(x, y, batch_size),
                   "one": harness.make_dataloader(x[:1], y[:1], batch_size),  # rank 1's share is empty
                   "empty": harness.make_dataloader(x[:0], y[:0], batch_size)}
    evaluator = Evaluator(harness.make_model(initial_weights()), dataloaders, metrics={"acc": Accuracy()},
                          driver=harness.driver_name, device=config["device"], verbose=0,
                          input_mapping={"y": "target"})
    results = evaluator.run()
    again = evaluator.run()  # nobody was left waiting in a collective: a second evaluation works alike
    rank = evaluator.driver.comm.rank
    Path(config["out"], f"rank_{rank}.json").write_text(json.dumps({
        "results": results, "no_data": list(results.no_data), "again": again,
        "world_size": evaluator.driver.comm.world_size, "split": evaluator._split["one"]}))
    evaluator.driver.comm.barrier()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
