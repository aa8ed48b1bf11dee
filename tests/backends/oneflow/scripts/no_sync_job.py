"""A 2-rank oneflow job: trains with accumulation (so with no_sync), then probes the gradients a
backward inside no_sync leaves on each rank. Usage: python no_sync_job.py CONFIG_JSON; each rank
writes ``<out>/rank_<r>.json`` (final weights and the probed gradient)."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

import oneflow as flow  # noqa: E402  (imported at the top, as users do: the self-launch must cope)

from fastcore_train import Trainer  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.oneflow import Harness  # noqa: E402


def no_sync_probe(trainer, x, y):
    """Gradients after a backward inside no_sync: each rank's own (not averaged)."""
    driver = trainer.driver
    fn, _ = driver.get_model_call_fn("train_step")
    rank = driver.comm.rank
    xs, ys = flow.from_numpy(x[rank * 4:(rank + 1) * 4]), flow.from_numpy(y[rank * 4:(rank + 1) * 4])
    driver.zero_grad()
    with driver.no_sync():
        driver.backward(fn(xs, ys)["loss"])
    local = driver.unwrap_model().fc1.weight.grad.numpy().copy()
    driver.zero_grad()
    return local


def main(config):
    harness = Harness()
    x, y = make_data(64, seed=4)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1), driver="oneflow",
                      device=config["device"], n_epochs=1, progress_bar=None, accumulation_steps=2)
    trainer.run(num_eval_sanity_batch=0)
    probe = no_sync_probe(trainer, x, y)
    weights = {name: value.tolist() for name, value in harness.get_weights(trainer.driver.unwrap_model()).items()}
    rank = trainer.driver.comm.rank
    (Path(config["out"]) / f"rank_{rank}.json").write_text(json.dumps({"weights": weights, "probe": probe.tolist()}))
    trainer.driver.comm.barrier()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
