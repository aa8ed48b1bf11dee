"""What the model-parallel job scripts of every backend share (tests/backends/<name>/scripts/model_parallel_job.py):
the per-step loss recorder that can also checkpoint and stop, starting a script on 2 self-launched
ranks, reading what each rank wrote, and comparing full weights within a tolerance."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import numpy as np

from fastcore_train import Callback


class StepLosses(Callback):
    """Each step's loss on this rank; with ``stop_at``, a checkpoint into ``folder`` there (asynchronous
    unless ``blocking``), then stop."""

    def __init__(self, stop_at: Optional[int] = None, folder: Optional[Path] = None, blocking: bool = True) -> None:
        self.losses: list[float] = []
        self.stop_at, self.folder, self.blocking = stop_at, folder, blocking

    def on_before_backward(self, trainer: Any, outputs: dict) -> None:
        self.losses.append(float(outputs["loss"].detach()))

    def on_train_batch_end(self, trainer: Any) -> None:
        if trainer.global_forward_batches == self.stop_at:
            trainer.save_checkpoint(self.folder, blocking=self.blocking)
            trainer.wait_for_checkpoint()
            trainer.stop_training()


def run_self_launched(script: str, out: Path, timeout: float = 300):
    """Run ``script`` (which self-launches its 2 ranks) with ``{"out": out}``; a timed-out job is
    killed with every process it started."""
    from tests.processes import run_process_tree

    return run_process_tree([sys.executable, script, json.dumps({"out": str(out)})], timeout)


def rank_records(folder: Path, world_size: int = 2) -> list[dict]:
    """``<folder>/rank_<r>.json`` of every rank, in rank order."""
    return [json.loads((Path(folder) / f"rank_{rank}.json").read_text()) for rank in range(world_size)]


def assert_weights_within(actual: dict, expected: dict, atol: float = 1e-5) -> None:
    """The same weight names, each within ``atol`` (lists or arrays)."""
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(np.asarray(actual[name]), np.asarray(expected[name]), atol=atol, rtol=0,
                                   err_msg=name)
