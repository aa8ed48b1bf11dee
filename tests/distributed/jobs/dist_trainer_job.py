"""fastNLP 0.x's DistTrainer on the ranks of ``torch.distributed.launch`` (torch), then our Trainer
doing the same run in the same processes, for tests/distributed/test_dist_trainer.py.

Usage: python -m torch.distributed.launch --nproc_per_node 2 dist_trainer_job.py CONFIG_JSON (the
launcher puts ``--local-rank=N`` before it). Config: ``out``. Each rank writes
``<out>/rank_<r>.json`` (train()'s dict, its local rank, world size, how often each callback ran)
and ``<out>/rank_<r>.npz`` (``dist_*`` and ``trainer_*`` weights).
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from fastcore_train import Accuracy, Callback, DistTrainer, Trainer  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.torch import Harness  # noqa: E402

SETTINGS = dict(n_epochs=2, update_every=2, validate_every=3, batch_size=4)


class Count(Callback):
    def __init__(self, name):
        self.name, self.batches = name, 0

    @property
    def callback_name(self):
        return self.name

    def on_train_batch_end(self, trainer):
        self.batches += 1


def main() -> None:
    config = json.loads(sys.argv[-1])
    out = Path(config["out"])
    harness = Harness()
    x, y = make_data(44)
    dev_x, dev_y = make_data(18, seed=2)
    train_data = harness.make_dataloader(x, y, 1).dataset
    dev_data = harness.make_dataloader(dev_x, dev_y, 1).dataset
    every, master = Count("every_rank"), Count("master_only")

    model = harness.make_model(initial_weights())
    dist = DistTrainer(train_data, model, harness.make_sgd(model, 0.2), callbacks_all=[every], callbacks_master=[master],
                       batch_size_per_gpu=SETTINGS["batch_size"], n_epochs=SETTINGS["n_epochs"], num_workers=0,
                       dev_data=dev_data, metrics=Accuracy(), metric_key="-acc", update_every=SETTINGS["update_every"],
                       validate_every=SETTINGS["validate_every"], save_path=out / "best", use_tqdm=False,
                       evaluate_input_mapping={"y": "target"})
    result = dist.train(load_best_model=False)

    reference = harness.make_model(initial_weights())
    trainer = Trainer(reference, torch.utils.data.DataLoader(train_data, batch_size=SETTINGS["batch_size"], shuffle=True),
                      harness.make_sgd(reference, 0.2), device=None, n_epochs=SETTINGS["n_epochs"],
                      accumulation_steps=SETTINGS["update_every"], evaluate_every=SETTINGS["validate_every"],
                      evaluate_dataloaders=torch.utils.data.DataLoader(dev_data, batch_size=SETTINGS["batch_size"]),
                      metrics={"Accuracy": Accuracy()}, evaluate_input_mapping={"y": "target"}, progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)

    rank = dist.rank
    weights = {f"dist_{k}": v for k, v in harness.get_weights(model).items()}
    weights.update({f"trainer_{k}": v for k, v in harness.get_weights(reference).items()})
    np.savez(out / f"rank_{rank}.npz", **weights)
    (out / f"rank_{rank}.json").write_text(json.dumps({
        "result": result, "local_rank": dist.local_rank, "world_size": dist.world_size,
        "every_rank": every.batches, "master_only": master.batches, "trainer_batches": trainer.global_forward_batches,
        "argv": sys.argv[1:-1]}))


if __name__ == "__main__":
    main()
