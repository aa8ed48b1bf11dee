"""The trainer's progress counters, kept in one JSON-able object so checkpoints can carry them."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional


@dataclass
class TrainerState:
    """Where training is: epochs and batches done, and how many there will be.

    ``cur_epoch_idx`` counts finished epochs (it is already incremented when
    ``on_train_epoch_end`` fires), ``batch_idx_in_epoch`` counts batches done in the current
    epoch, ``global_forward_batches`` counts batches done in the whole run.
    """

    n_epochs: int
    cur_epoch_idx: int = 0
    global_forward_batches: int = 0
    batch_idx_in_epoch: int = 0
    num_batches_per_epoch: Optional[int] = None
    n_batches: int = -1

    @property
    def total_batches(self) -> Optional[int]:
        """Batches the whole run trains, when the dataloader is sized: ``n_batches`` when given, else
        the batches of the epochs done (as many as they had: a dataset may grow between epochs) and
        the current epoch's count for this epoch and each one left; after the last epoch, the
        batches trained."""
        if self.n_batches > 0:
            return self.n_batches
        if self.num_batches_per_epoch is None:
            return None
        done = self.global_forward_batches - self.batch_idx_in_epoch  # in the epochs finished
        return done + self.num_batches_per_epoch * max(0, self.n_epochs - self.cur_epoch_idx)

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("cur_epoch_idx", "global_forward_batches", "batch_idx_in_epoch"):
            setattr(self, key, int(state[key]))
