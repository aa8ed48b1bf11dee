"""The data-parallel job of the multi-process conformance tests, the same for every backend.

Usage: python train_job.py CONFIG_JSON, run self-launched (``device`` a list) or under the
backend's launcher. Config: ``backend``, ``out``, ``device``, ``world_size``, and optionally
``batch_size`` (per rank), ``shuffle``, ``n_epochs``, ``n_batches``, ``accumulation_steps``, ``grad_clip``,
``evaluate`` (samples), ``fail_rank``/``fail_at``, ``save_at``/``save_to``/``save_errors_to``/``save_async``, ``resume_from``,
``save_after_run`` (a checkpoint folder, saved once run() returned), ``preempt`` (``{"checkpoints": folder,
"rank": r, "at": b, "signal": name, "every_n_batches": n}``: ``CheckpointCallback(folder, requeue_signal=SIGUSR1,
every_n_batches=n)``, and rank r sends itself the signal (default SIGUSR1) after batch b unless ``<out>/signalled``
exists), ``save_model`` (folder), ``activation_checkpointing``, ``rank_seeded_weights``, ``user_wrapped``, ``slow``, ``announce`` (rank 0 prints TRAINING after
batch 2: every rank has started training), ``hold`` (after batch 2 every rank waits for ``<out>/release``;
rank 0 writes ``<out>/training`` first). Each rank writes
``<out>/rank_<r>.npz`` (final weights) and ``<out>/rank_<r>.json`` (what it saw and did).
With ``save_errors_to`` (a folder), a failing save is caught (as a user's callback might), written
to ``<folder>/rank_<r>.error``, and training goes on.
"""
import importlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script; a pool rank has it already
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fastcore_train import Accuracy, Callback, CheckpointCallback, Event, GradClipCallback, Trainer  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.distributed.jobs.job_callbacks import Fail, SignalOnce, Slow, announce, hold  # noqa: E402
from tests.distributed.launchers import BACKENDS  # noqa: E402

EVENTS = ("on_train_begin", "on_train_epoch_begin", "on_train_batch_begin", "on_before_backward",
          "on_after_optimizers_step", "on_train_batch_end", "on_train_epoch_end", "on_evaluate_end", "on_train_end")
# The interface variables the library may set (two-host tests read them back).
INTERFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_btl")
# Where launchers put the rank before any framework is imported (rank-seeded weights need it early).
_RANK_VARIABLES = ("RANK", "PADDLE_TRAINER_ID", "OMPI_COMM_WORLD_RANK", "FASTCORE_TRAIN_LAUNCHED_RANK")


class SaveAndStop(Callback):
    def __init__(self, at, folder, errors_to=None, blocking=True):
        self.at, self.folder, self.errors_to, self.blocking = at, folder, errors_to, blocking

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches == self.at:
            try:
                trainer.save_checkpoint(self.folder, blocking=self.blocking)
            except Exception as error:
                if self.errors_to is None:
                    raise
                error_file = Path(self.errors_to, f"rank_{trainer.driver.comm.rank}.error")
                error_file.write_text(f"{type(error).__name__}: {error}")
                return
            trainer.stop_training()


def launcher_rank() -> int:
    for name in _RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def main(config):
    backend = BACKENDS[config["backend"]]
    harness = importlib.import_module(f"tests.conformance.harnesses.{backend.name}").Harness()
    out = Path(config["out"])
    world_size = config["world_size"]
    batch_size = config.get("batch_size", 8) * (world_size if backend.global_batch_size else 1)
    x, y = make_data(64, seed=4)
    # Rank-seeded weights differ per rank: the driver must start every rank from rank 0's.
    model = harness.make_model(initial_weights(seed=launcher_rank() if config.get("rank_seeded_weights") else 0))
    inner = model
    if config.get("user_wrapped"):  # the user set up the process group and data-parallel model themselves
        model = harness.wrap_user_data_parallel(model)
    callbacks = []
    if "fail_rank" in config:
        callbacks.append(Fail(config["fail_rank"], config.get("fail_at", 2)))
    if "save_at" in config:
        callbacks.append(SaveAndStop(config["save_at"], config["save_to"], config.get("save_errors_to"),
                                     blocking=not config.get("save_async")))
    if config.get("slow"):
        callbacks.append(Slow())
    if "preempt" in config:
        import signal
        preempt = config["preempt"]
        callbacks += [CheckpointCallback(preempt["checkpoints"], save_object="checkpoint", requeue_signal=signal.SIGUSR1,
                                         every_n_batches=preempt.get("every_n_batches")),
                      SignalOnce(preempt["rank"], preempt["at"], getattr(signal, preempt.get("signal", "SIGUSR1")),
                                 out / "signalled")]
    if "grad_clip" in config:
        callbacks.append(GradClipCallback(**config["grad_clip"]))
    evaluate = {}
    if config.get("evaluate"):
        ex, ey = make_data(config["evaluate"], seed=9)
        evaluate = dict(evaluate_dataloaders={"dev": harness.make_dataloader(ex, ey, 5)},
                        metrics={"acc": Accuracy()}, evaluate_input_mapping={"y": "target"})
    train = harness.make_dataloader(x, y, batch_size, shuffle=config.get("shuffle", False), with_index=True)
    trainer = Trainer(model, train, harness.make_sgd(model, 0.1), driver=harness.driver_name,
                      device=config.get("device"), n_epochs=config.get("n_epochs", 1),
                      n_batches=config.get("n_batches", -1), progress_bar=None,
                      callbacks=callbacks, accumulation_steps=config.get("accumulation_steps", 1),
                      activation_checkpointing=config.get("activation_checkpointing"), **evaluate)
    seen, events, every = [], [], []
    trainer.add_callback_fn(Event.on_train_batch_begin(), lambda t, batch, i: seen.extend(harness.indices_of(batch)))
    for name in EVENTS:
        trainer.add_callback_fn(getattr(Event, name)(), lambda t, *args, _name=name: events.append(_name))
    trainer.add_callback_fn(Event.on_train_batch_end(every=3), lambda t: every.append(t.global_forward_batches))
    if config.get("announce"):  # rank 0 says TRAINING once every rank has trained 2 batches
        trainer.add_callback_fn(Event.on_train_batch_end(once=2), announce)
    if config.get("hold"):  # every rank waits after batch 2 until <out>/release exists (<out>/training says so)
        trainer.add_callback_fn(Event.on_train_batch_end(once=2), lambda t: hold(t, out))
    trainer.run(num_eval_sanity_batch=0, resume_from=config.get("resume_from"))
    if config.get("save_after_run"):
        trainer.save_checkpoint(config["save_after_run"])

    driver = trainer.driver
    rank = driver.comm.rank
    round_trip = None
    if config.get("save_model"):
        trainer.save_model(config["save_model"])
        fresh = harness.make_model(initial_weights(seed=11))
        loader = Trainer(fresh, harness.make_dataloader(x, y, batch_size), harness.make_sgd(fresh, 0.1),
                         driver=harness.driver_name, device=config.get("device"), progress_bar=None)
        loader.load_model(config["save_model"])
        round_trip = bool(np.array_equal(harness.predict(fresh, x), harness.predict(trainer.model, x)))
    gathered = driver.comm.all_gather_object({"rank": rank, "text": "x" * (rank + 3)})
    broadcast = driver.comm.broadcast_object(f"from {rank}", src=world_size - 1)
    np.savez(out / f"rank_{rank}.npz", **harness.get_weights(inner))
    results = trainer.evaluator.run() if trainer.evaluator is not None else {}
    (out / f"rank_{rank}.json").write_text(json.dumps({
        "seen": seen, "results": results, "world_size": driver.comm.world_size, "events": events, "every": every,
        "round_trip": round_trip, "global_forward_batches": trainer.global_forward_batches,
        "driver": type(driver).__name__, "model_file_suffix": driver.io.model_file_suffix,
        "gathered": gathered, "broadcast": broadcast, "recomputed": trainer.activation_checkpointed,
        "interfaces": {name: os.environ.get(name) for name in INTERFACE_VARIABLES}}))
    driver.comm.barrier()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
