"""A DeepSpeed job for the DeepSpeed tests, run as a real script (self-launched or under torchrun).

Usage: python deepspeed_job.py CONFIG_JSON. The job trains once per ZeRO stage in
``config["stages"]`` (one process pays DeepSpeed's start-up once for all of them); with
``reload`` it then loads the initial weights back (``Trainer.load_model``) and trains the same
epochs again, which must end on the same weights. For stage S each
rank writes ``<out>/stage_S_rank_<r>.npz`` (final weights, gathered from every rank) and
``<out>/stage_S_rank_<r>.json`` (evaluation results, counters, driver facts).
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
if str(ROOT) not in sys.path:  # run as a script; a pool rank has it already
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fastcore_train import Accuracy, Callback, Trainer  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.torch import Harness  # noqa: E402
from tests.distributed.jobs.job_callbacks import Fail  # noqa: E402


class SaveAt(Callback):
    """Write a checkpoint after batch ``at`` and train on."""

    def __init__(self, at, folder):
        self.at, self.folder = at, folder

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            trainer.save_checkpoint(self.folder)


def canonical(harness, state):
    """A torch state dict of the harness MLP in the harness's numpy layout."""
    return {"w1": state["fc1.weight"].numpy().T, "b1": state["fc1.bias"].numpy(),
            "w2": state["fc2.weight"].numpy().T, "b2": state["fc2.bias"].numpy()}


def train_stage(config, stage, harness, out):
    x, y = make_data(64, seed=4)
    model = harness.make_model(initial_weights())
    zero = {"stage": stage}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0  # partition even this small model's weights
    callbacks = []
    if "save_at" in config:
        callbacks.append(SaveAt(config["save_at"], f"{config['save_to']}/stage_{stage}"))
    if "fail_rank" in config:
        callbacks.append(Fail(config["fail_rank"], config["fail_at"]))
    evaluate = {}
    if config.get("evaluate"):
        ex, ey = make_data(config["evaluate"], seed=9)
        evaluate = dict(evaluate_dataloaders={"dev": harness.make_dataloader(ex, ey, 5)},
                        metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"})
    trainer = Trainer(model, harness.make_dataloader(x, y, config.get("batch_size", 8), shuffle=config.get("shuffle", False)),
                      harness.make_sgd(model, 0.1, momentum=config.get("momentum", 0.0)), driver="deepspeed",
                      device=config.get("device"), n_epochs=config.get("n_epochs", 1), progress_bar=None,
                      callbacks=callbacks, accumulation_steps=config.get("accumulation_steps", 1),
                      deepspeed_kwargs={"config": {"zero_optimization": zero}}, **evaluate)
    resume = config.get("resume_from")
    initial = out / f"initial_stage_{stage}"
    if config.get("reload"):
        trainer.save_model(initial)
    trainer.run(num_eval_sanity_batch=1 if evaluate else 0,
                resume_from=f"{resume}/stage_{stage}" if resume else None)
    if config.get("reload"):  # back to the initial weights, then the same epochs again
        trainer.load_model(initial)
        trainer.n_epochs *= 2
        trainer.run(num_eval_sanity_batch=0)
    driver = trainer.driver
    if config.get("save_model"):
        trainer.save_model(f"{config['save_model']}/stage_{stage}")
    weights = canonical(harness, driver.full_state_dict())
    results = trainer.evaluator.run() if trainer.evaluator is not None else {}
    prefix = out / f"stage_{stage}_rank_{driver.comm.rank}"
    np.savez(f"{prefix}.npz", **weights)
    Path(f"{prefix}.json").write_text(json.dumps({
        "results": results, "world_size": driver.comm.world_size, "zero_stage": driver.zero_stage,
        "global_forward_batches": trainer.global_forward_batches, "driver": type(driver).__name__}))


def main(config):
    harness = Harness()
    out = Path(config["out"])
    for stage in config["stages"]:
        train_stage(config, stage, harness, out)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
