"""A 2-rank job, the same for every backend: each rank logs and prints, then trains one epoch
with a CSV logger. Usage: python rank_output_job.py CONFIG_JSON (backend, out, device and the Trainer's
output_from_new_proc; see tests/distributed/launchers.py)."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script; a pool rank has it already
    sys.path.insert(0, str(ROOT))

import importlib  # noqa: E402

from fastcore_train import CSVLoggerCallback, Trainer  # noqa: E402
from fastcore_train.log import logger  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402


def main(config):
    harness = importlib.import_module(f"tests.conformance.harnesses.{config['backend']}").Harness()
    out = Path(config["out"])
    x, y = make_data(32, seed=4)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 8), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, device=config["device"], n_epochs=1, progress_bar=None,
                      callbacks=[CSVLoggerCallback(out / "csv", log_every_n_batches=1)],
                      output_from_new_proc=config["output_from_new_proc"], log_file=str(out / "train.log"))
    rank = trainer.driver.comm.rank
    logger.info("INFO from rank %d", rank)
    logger.warning("WARNING from rank %d", rank)
    print(f"STDOUT from rank {rank}", flush=True)
    print(f"STDERR from rank {rank}", file=sys.stderr, flush=True)
    trainer.run(num_eval_sanity_batch=0)
    (out / f"rank_{rank}.json").write_text(json.dumps({"batches": trainer.global_forward_batches}))
    trainer.driver.comm.barrier()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
