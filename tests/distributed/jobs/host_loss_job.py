"""A job for the host-loss tests: docs/multinode.md's script ("A script for any launcher").

Usage (under a launcher or with the rank variables set, on each host):
host_loss_job.py OUT FRAMEWORK COLLECTIVE_TIMEOUT [HOLD_AT]. Trains two_hosts_job.py's Regression
(torch, paddle or oneflow) on its 512 fixed samples, 3 epochs, batch 16 per rank, device=None, with a
``CheckpointCallback(OUT/checkpoints, every_n_batches=4)`` and ``run(resume_from="auto")``: a
restarted job resumes from the newest checkpoint. With HOLD_AT (a global batch) every rank stops
after that batch once (``OUT/held_<rank>`` says it waits) until ``OUT/release`` exists: the test
cuts a host's link meanwhile. Each rank writes OUT/rank_<r>.json (world size, batches, weights) at
the end; rank 0 prints "resumed at batch N" when it resumed.
"""
import importlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fastcore_train import Callback, CheckpointCallback, Event, Trainer, seed_everything  # noqa: E402 (before oneflow)
from tests.distributed.jobs import two_hosts_job  # noqa: E402

EVERY = 4


class Hold(Callback):
    """After global batch ``at`` (once: not after a resume past it) wait for OUT/release."""

    def __init__(self, out: Path, at: int):
        self.out, self.at = out, at

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches != self.at:
            return
        Path(self.out, f"held_{trainer.driver.comm.rank}").write_text(str(self.at))
        deadline = time.monotonic() + 60
        while not Path(self.out, "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)


def main(out: Path, framework: str, collective_timeout: float, hold_at: int = -1) -> None:
    importlib.import_module(framework)
    seed_everything(0)
    model, loader, optimizer = getattr(two_hosts_job, f"{framework}_parts")(16)
    callbacks = [CheckpointCallback(out / "checkpoints", save_object="checkpoint", every_n_batches=EVERY)]
    if hold_at > 0:
        callbacks.append(Hold(out, hold_at))
    trainer = Trainer(model, loader, optimizer, device=None, n_epochs=3, input_mapping={0: "x", 1: "y"},
                      progress_bar=None, callbacks=callbacks, collective_timeout=collective_timeout)
    started = []
    trainer.add_callback_fn(Event.on_train_begin(), lambda t: started.append(t.global_forward_batches))
    trainer.run(num_eval_sanity_batch=0, resume_from="auto")
    comm = trainer.driver.comm
    if comm.rank == 0 and started and started[0]:
        print(f"resumed at batch {started[0]}", flush=True)
    Path(out, f"rank_{comm.rank}.json").write_text(json.dumps({
        "rank": comm.rank, "world_size": comm.world_size, "batches": trainer.global_forward_batches,
        "weights": {name: np.asarray(value.numpy() if hasattr(value, "numpy") else value).tolist()
                    for name, value in model.state_dict().items()}}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), *map(int, sys.argv[4:5]))
