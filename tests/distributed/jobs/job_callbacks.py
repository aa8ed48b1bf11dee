"""Callbacks the multi-process test jobs use to make a rank fail or a run slow down on purpose."""
import time

from fastcore_train import Callback


class Fail(Callback):
    """Rank ``rank`` raises after global batch ``at``."""

    def __init__(self, rank, at):
        self.rank, self.at = rank, at

    def on_train_batch_end(self, trainer):
        if trainer.driver.comm.rank == self.rank and trainer.global_forward_batches == self.at:
            raise RuntimeError(f"rank {self.rank} fails on purpose")


class Slow(Callback):
    """Keeps a long run going slowly, for the interrupt and failure tests."""

    def on_train_batch_end(self, trainer):
        time.sleep(0.05)


class SignalOnce(Callback):
    """Rank ``rank`` sends itself ``signum`` after global batch ``at``, once per ``marker`` file (a rerun does not)."""

    def __init__(self, rank, at, signum, marker):
        self.rank, self.at, self.signum, self.marker = rank, at, signum, marker

    def on_train_batch_end(self, trainer):
        import os
        from pathlib import Path

        if trainer.driver.comm.rank == self.rank and trainer.global_forward_batches == self.at \
                and not Path(self.marker).exists():
            Path(self.marker).write_text(str(self.at))
            os.kill(os.getpid(), self.signum)


def announce(trainer) -> None:
    """Rank 0 prints TRAINING (for a test waiting to signal a job in training), once every rank is
    there: a barrier first, as a rank of a lazy framework (jittor) may run ahead of one still starting."""
    trainer.driver.comm.barrier()
    if trainer.driver.comm.rank == 0:
        print("TRAINING", flush=True)


def hold(trainer, folder) -> None:
    """Every rank waits (after a barrier) until ``<folder>/release`` exists; rank 0 first writes
    ``<folder>/training``: a test looks at the job while it is in training, then lets it go on."""
    import time
    from pathlib import Path

    trainer.driver.comm.barrier()
    if trainer.driver.comm.rank == 0:
        Path(folder, "training").write_text("")
    deadline = time.monotonic() + 120
    while not Path(folder, "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return 0
