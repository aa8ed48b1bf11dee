"""A job for the FairScale and torch FSDP tests, run as a real script (self-launched or under torchrun).

Usage: python sharded_job.py CONFIG_JSON, or :func:`main` on a rank pool's ranks. Every run trains the conformance MLP with SGD (momentum
and a step LR schedule by default, so optimizer and scheduler state matter) on ``samples``
shuffled samples. ``mode``:

- ``"train"``: train with ``driver``; with ``compare_ddp``, then train a fresh model the same way
  with the DDP driver in the same processes; with ``evaluate``, evaluate the trained model.
- ``"checkpoint"``: train until batch ``save_at``, save a checkpoint and the model there, and stop;
  then resume from the checkpoint in a fresh Trainer (fresh model and optimizer) and finish; then
  load the saved model into a third fresh Trainer.
- ``"async"``: at batch ``save_at`` save a blocking checkpoint ``sync`` and an asynchronous one
  ``checkpoint``, whose background write is held until training has gone 2 batches on; there a
  second asynchronous save ``second`` starts (it must wait for the first) and training finishes;
  then load both checkpoints' weights (``sync.*``, ``async.*``) and resume from ``checkpoint``.
- ``"async_error"``: at batch ``save_at`` save ``checkpoint`` blocking, then again asynchronously
  with a training state DCP cannot write (a lambda), wait for it and record its error; stop; then
  load ``checkpoint`` (the blocking one, untouched) into a fresh Trainer (``sync.*``).

Each rank writes ``<out>/rank_<r>.npz`` (full weights: ``final.*``, ``ddp.*``) and
``<out>/rank_<r>.json`` (predictions, evaluation results, driver facts).

The bottom of this file holds what the tests use to run it and read its outputs.
"""
import contextlib
import json
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fastcore_train import Accuracy, Callback, GradClipCallback, LRSchedCallback, Trainer  # noqa: E402
from fastcore_train.drivers.persistence import PendingWrites  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.torch import Harness  # noqa: E402
from tests.distributed.jobs.job_callbacks import Fail  # noqa: E402

HARNESS = Harness()
PREDICT_X = make_data(10, seed=7)[0]


def full_params(driver):
    """The driver's context in which the user's model holds full parameters (sharded drivers)."""
    return getattr(driver, "full_params", contextlib.nullcontext)()


def full_weights(trainer) -> dict:
    # Cloned inside the context: numpy views of FSDP's gathered parameters would pin their storage.
    with full_params(trainer.driver):
        state = {name: value.detach().clone() for name, value in trainer.model.state_dict().items()}
    model = HARNESS.make_model(initial_weights())
    model.load_state_dict(state)
    return HARNESS.get_weights(model)


def predictions(trainer) -> list:
    with full_params(trainer.driver):
        values = HARNESS.predict(trainer.model, PREDICT_X).tolist()
    trainer.model.train()
    return values


class AtBatch(Callback):
    """Acts at batch ``at``, on files in ``folder``; writes what it saw into ``record``."""

    def __init__(self, at, folder, record):
        self.at, self.folder, self.record = at, Path(folder), record


class SaveAndStop(AtBatch):
    """At batch ``at``: write a checkpoint and the model, note the predictions, stop."""

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            trainer.save_checkpoint(self.folder / "checkpoint")
            trainer.save_model(self.folder / "model")
            self.record["saved_predictions"] = predictions(trainer)
            trainer.stop_training()


class Gate:
    """Holds this rank's background checkpoint writes until ``released`` (around ``driver.io``:
    the framework's own write, or a snapshot file rank 0 writes); the real files are still written."""

    def __init__(self, io):
        self.released = threading.Event()
        start, write = io.start_async_write, io.write_object

        def gated_start(model_path, state_path):
            pending = start(model_path, state_path)
            return None if pending is None else PendingWrites([self] + pending.writes)

        def gated_write(obj, path):
            if obj is not None:  # (None: nothing to write, on the training thread)
                self.result()
            write(obj, path)

        io.start_async_write, io.write_object = gated_start, gated_write

    def result(self):
        assert self.released.wait(120), "the gate was never opened"


class AsyncSaves(AtBatch):
    """See mode ``"async"``: the checks on the files are recorded, the tests assert them."""

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            trainer.save_checkpoint(self.folder / "sync")
            self.gate = Gate(trainer.driver.io)
            trainer.save_checkpoint(self.folder / "checkpoint", blocking=False)
            self.record["published_at_return"] = (self.folder / "checkpoint").exists()
        elif trainer.global_forward_batches == self.at + 2:
            self.record["published_2_batches_on"] = (self.folder / "checkpoint").exists()
            threading.Timer(0.5, self.gate.released.set).start()  # (the save below must wait for it)
            trainer.save_checkpoint(self.folder / "second", blocking=False)
            self.record["first_published_when_second_started"] = (self.folder / "checkpoint" / "meta.json").is_file()


class FailingAsyncSave(AtBatch):
    """See mode ``"async_error"``."""

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches != self.at:
            return
        trainer.save_checkpoint(self.folder / "checkpoint")
        self.record["saved_predictions"] = predictions(trainer)
        io = trainer.driver.io
        state = io.training_state_object
        io.training_state_object = lambda: {**state(), "unpicklable": lambda: None}  # fails in DCP's write
        trainer.save_checkpoint(self.folder / "checkpoint", blocking=False)
        io.training_state_object = state
        try:
            trainer.wait_for_checkpoint()
        except Exception as error:
            self.record["error"] = f"{type(error).__name__}: {error}"
        trainer.wait_for_checkpoint()  # the error was raised once: nothing is left to raise
        trainer.stop_training()


def build_trainer(config, driver, callbacks=()):
    model = HARNESS.make_model(initial_weights())
    optimizer = HARNESS.make_sgd(model, 0.1, momentum=config.get("momentum", 0.9))
    callbacks = list(callbacks)
    if config.get("scheduler", True):
        callbacks.append(LRSchedCallback(HARNESS.make_lr_scheduler(optimizer)))
    if "fail_rank" in config:
        callbacks.append(Fail(config["fail_rank"], config.get("fail_at", 2)))
    if "grad_clip" in config:
        callbacks.append(GradClipCallback(**config["grad_clip"]))
    x, y = make_data(config.get("samples", 64), seed=4)
    evaluate = {}
    if config.get("evaluate"):
        ex, ey = make_data(config["evaluate"], seed=9)
        evaluate = dict(evaluate_dataloaders={"dev": HARNESS.make_dataloader(ex, ey, 5)},
                        metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"})
    driver_kwargs = {key: config[key] for key in ("fairscale_kwargs", "torch_fsdp_kwargs") if key in config}
    dataloader = HARNESS.make_dataloader(x, y, config.get("batch_size", 8), shuffle=config.get("shuffle", True))
    return Trainer(model, dataloader, optimizer, driver=driver, device=config.get("device"),
                   n_epochs=config.get("n_epochs", 2), progress_bar=None, callbacks=callbacks, accumulation_steps=config.get("accumulation_steps", 1),
                   **evaluate, **driver_kwargs)


def train(config, out, record, weights):
    trainer = build_trainer(config, config["driver"])
    trainer.run(num_eval_sanity_batch=0)
    weights.update({f"final.{k}": v for k, v in full_weights(trainer).items()})
    record.update(driver=type(trainer.driver).__name__, world_size=trainer.driver.comm.world_size,
                  optimizers=[type(o).__name__ for o in trainer.driver.optimizers],
                  results=trainer.evaluator.run() if trainer.evaluator is not None else {})
    if config.get("compare_ddp"):
        ddp = build_trainer(config, "torch")
        ddp.run(num_eval_sanity_batch=0)
        weights.update({f"ddp.{k}": v for k, v in full_weights(ddp).items()})
        record["ddp_driver"] = type(ddp.driver).__name__
    return trainer.driver.comm.rank


def checkpoint(config, out, record, weights):
    first = build_trainer(config, config["driver"], [SaveAndStop(config["save_at"], out, record)])
    first.run(num_eval_sanity_batch=0)
    resumed = build_trainer(config, config["driver"])
    resumed.run(num_eval_sanity_batch=0, resume_from=out / "checkpoint")
    weights.update({f"final.{k}": v for k, v in full_weights(resumed).items()})
    loaded = build_trainer(config, config["driver"])
    loaded.load_model(out / "model")
    record.update(loaded_predictions=predictions(loaded), driver=type(loaded.driver).__name__,
                  resumed_batches=resumed.global_forward_batches)
    return loaded.driver.comm.rank


def async_checkpoint(config, out, record, weights):
    first = build_trainer(config, config["driver"], [AsyncSaves(config["save_at"], out, record)])
    first.run(num_eval_sanity_batch=0)
    for name, folder in (("sync", "sync"), ("async", "checkpoint")):
        loaded = build_trainer(config, config["driver"])
        loaded.load_checkpoint(out / folder, resume_training=False)
        weights.update({f"{name}.{k}": v for k, v in full_weights(loaded).items()})
    resumed = build_trainer(config, config["driver"])
    resumed.run(num_eval_sanity_batch=0, resume_from=out / "checkpoint")
    weights.update({f"final.{k}": v for k, v in full_weights(resumed).items()})
    weights.update({f"first.{k}": v for k, v in full_weights(first).items()})
    record.update(driver=type(resumed.driver).__name__, resumed_batches=resumed.global_forward_batches)
    return resumed.driver.comm.rank


def async_error(config, out, record, weights):
    first = build_trainer(config, config["driver"], [FailingAsyncSave(config["save_at"], out, record)])
    first.run(num_eval_sanity_batch=0)
    loaded = build_trainer(config, config["driver"])
    loaded.load_checkpoint(out / "checkpoint")
    record.update(loaded_predictions=predictions(loaded), driver=type(loaded.driver).__name__)
    return loaded.driver.comm.rank


MODES = {"train": train, "checkpoint": checkpoint, "async": async_checkpoint, "async_error": async_error}


def main(config):
    out = Path(config["out"])
    record, weights = {}, {}
    rank = MODES[config.get("mode", "train")](config, out, record, weights)
    np.savez(out / f"rank_{rank}.npz", **weights)
    (out / f"rank_{rank}.json").write_text(json.dumps(record))


# ---------------------------------------------------------------------- for the tests running this job
def run_job(config, launcher="self", nproc=2, timeout=120):
    """Run this script on ``nproc`` ranks; a timed-out job is killed with every process it started."""
    from tests.processes import run_process_tree

    config = {"device": ["cpu"] * nproc if launcher == "self" else None, **config}
    if launcher == "self":
        command = [sys.executable, __file__, json.dumps(config)]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
                   __file__, json.dumps(config)]
    return run_process_tree(command, timeout)


def run_in_pool(pool, config, timeout=120):
    """Run this job's :func:`main` on the ranks of a rank pool (torchrun's, reused across tests); a failing
    or hanging job fails the test with every rank's output."""
    pool.run(main, {"device": None, **config}, timeout=timeout)


def outputs(folder, world_size=2):
    ranks = []
    for rank in range(world_size):
        record = json.loads((Path(folder) / f"rank_{rank}.json").read_text())
        arrays = dict(np.load(Path(folder) / f"rank_{rank}.npz"))
        record["weights"] = {prefix: {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith(prefix + ".")}
                             for prefix in ("final", "ddp", "first", "sync", "async")}
        ranks.append(record)
    return ranks


def single_process_weights(config):
    """The same training in this process on the global batch (world size x per-rank batch)."""
    reference = {**config, "device": "cpu", "batch_size": 2 * config.get("batch_size", 8)}
    trainer = build_trainer(reference, "torch")
    trainer.run(num_eval_sanity_batch=0)
    return HARNESS.get_weights(trainer.model)


def assert_clipped_training_matches_one_process(config, clip, out, pool):
    """Two sharded ranks (of ``pool``) with ``GradClipCallback(**clip)`` end with the weights of one process
    clipping the global batch's gradients (and clipping did change them)."""
    run_in_pool(pool, {**config, "grad_clip": clip, "out": str(out)})
    expected = single_process_weights({**config, "grad_clip": clip})
    assert not np.allclose(expected["w1"], single_process_weights(config)["w1"]), "clipping made no difference"
    for rank in outputs(out):
        assert_close(rank["weights"]["final"], expected)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    assert set(actual) == set(expected), (sorted(actual), sorted(expected))
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=atol, err_msg=name)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
