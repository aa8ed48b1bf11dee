"""A data-parallel (or one-process) training job where one rank hangs, stops alone, dies or is sent SIGTERM.

Usage: python hang_job.py CONFIG_JSON. Config: ``backend``, ``out``, ``device``, ``world_size`` and
optionally ``n_epochs``, ``accumulation_steps``, ``collective_timeout``, ``hang_rank``/``hang_at``
(that rank sleeps for good after global batch ``hang_at``), ``stop_rank``/``stop_at`` (that rank
alone calls ``stop_training()`` after batch ``stop_at``; ``stop_at: "epoch"`` at the first epoch's
end), ``kill_rank``/``kill_at`` (that rank SIGKILLs itself), ``exit0_rank``/``exit0_at`` (that rank
ends with ``os._exit(0)``), ``checkpoints`` (a folder for
``CheckpointCallback(on_exceptions=KeyboardInterrupt)``; ``every_n_batches`` adds regular checkpoints
there; ``slow_exception_save``: seconds the exception checkpoint's model file takes, announced by
printing SAVING; ``slow_regular_save``: seconds each regular one's model file takes), ``slow`` and ``announce`` (rank 0 prints TRAINING after batch 2: every rank has trained), ``nan_rank``/``nan_at`` (that rank's loss is NaN at
global batch ``nan_at`` + 1, under ``NanGuardCallback(check_every=2)``). Each rank writes
``<out>/rank_<r>.json`` when ``run()`` returns, and
``<out>/rank_<r>.exception`` (the exception's type and the batch count) from ``on_exception``.
"""
import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script; a pool rank has it already
    sys.path.insert(0, str(ROOT))

from fastcore_train import Callback, CheckpointCallback, NanGuardCallback, Trainer  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.distributed.jobs.job_callbacks import announce  # noqa: E402
from tests.distributed.launchers import BACKENDS  # noqa: E402


class Trouble(Callback):
    """Makes the configured rank hang, stop, or die at its batch; records on_exception."""

    def __init__(self, config, out):
        self.config, self.out = config, out
        self.interrupted = False

    def _mine(self, trainer, key):
        return f"{key}_rank" in self.config and trainer.driver.comm.rank == self.config[f"{key}_rank"]

    def on_train_batch_end(self, trainer):
        batches = trainer.global_forward_batches
        if self._mine(trainer, "hang") and batches == self.config["hang_at"]:
            time.sleep(100000)
        if self._mine(trainer, "stop") and batches == self.config["stop_at"]:
            trainer.stop_training()
        if self._mine(trainer, "kill") and batches == self.config["kill_at"]:
            os.kill(os.getpid(), signal.SIGKILL)
        if self._mine(trainer, "exit0") and batches == self.config["exit0_at"]:
            os._exit(0)
        if self.config.get("slow"):
            time.sleep(0.05)
        if self.config.get("announce") and batches == 2:
            announce(trainer)

    def on_before_backward(self, trainer, outputs):
        if self._mine(trainer, "nan") and trainer.global_forward_batches == self.config["nan_at"]:
            outputs["loss"] = outputs["loss"] * float("nan")

    def on_train_epoch_end(self, trainer):
        if self._mine(trainer, "stop") and self.config["stop_at"] == "epoch":
            trainer.stop_training()


    def on_exception(self, trainer, exception):
        self.interrupted = True
        Path(self.out, f"rank_{trainer.driver.comm.rank}.exception").write_text(json.dumps(
            {"type": type(exception).__name__, "batches": trainer.global_forward_batches}))


def main(config):
    backend = BACKENDS[config["backend"]]
    harness = importlib.import_module(f"tests.conformance.harnesses.{backend.name}").Harness()
    out = Path(config["out"])
    world_size = config["world_size"]
    x, y = make_data(64, seed=4)
    batch_size = 8 * (world_size if backend.global_batch_size else 1)  # 4 batches per rank and epoch
    model = harness.make_model(initial_weights())
    trouble = Trouble(config, out)
    callbacks = [trouble]
    holder = {}

    def model_save_fn(folder):  # the model file, slow to write for the exception checkpoint
        if trouble.interrupted:
            print("SAVING", flush=True)
            time.sleep(config["slow_exception_save"])
        else:
            time.sleep(config.get("slow_regular_save", 0))
        holder["trainer"].driver.io.save_model(Path(folder) / "model", only_state_dict=True)

    if config.get("checkpoints"):
        callbacks.append(CheckpointCallback(config["checkpoints"], on_exceptions=KeyboardInterrupt,
                                            every_n_batches=config.get("every_n_batches"), save_object="checkpoint",
                                            model_save_fn=model_save_fn if {"slow_exception_save", "slow_regular_save"} & set(config)
                                            else None))
    if "nan_rank" in config:
        callbacks.append(NanGuardCallback(check_every=2))  # after Trouble's on_before_backward
    extra = {"collective_timeout": config["collective_timeout"]} if "collective_timeout" in config else {}
    trainer = Trainer(model, harness.make_dataloader(x, y, batch_size), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, device=config.get("device"), n_epochs=config.get("n_epochs", 3),
                      accumulation_steps=config.get("accumulation_steps", 1), progress_bar=None, callbacks=callbacks,
                      **extra)
    holder["trainer"] = trainer
    trainer.run(num_eval_sanity_batch=0)
    rank = trainer.driver.comm.rank
    (out / f"rank_{rank}.json").write_text(json.dumps({"batches": trainer.global_forward_batches,
                                                       "timeout": trainer.driver.comm.timeout}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
