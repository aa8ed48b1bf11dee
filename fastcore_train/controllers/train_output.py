"""What ``Trainer.run()`` returns: a :class:`TrainOutput`, as transformers' ``Trainer.train()`` does.

``global_step`` is the number of batches trained in all (``trainer.global_forward_batches``, the
step of the metric logs; transformers counts optimizer steps, which differs with
``accumulation_steps`` > 1). ``training_loss`` is the mean training loss over the batches this
``run()`` trained (NaN when it trained none or no loss went through ``trainer.backward``).
``metrics`` holds ``train_runtime`` (seconds), ``train_steps_per_second`` (batches per second),
``train_loss``, ``epoch`` (epochs done, with the fraction of an open one) and the last evaluation's
results under their own names.

The losses are added up on the device and read as numbers only every :data:`READ_EVERY` batches,
one such period late, so the sum costs no device synchronisation per batch and never waits for the
batches just queued. On a lazy framework (jittor), where an added
op or a read changes how the next step's graph is fused and so its float rounding, no loss is
tracked and ``training_loss`` is NaN: training stays bit-identical to a hand-written loop.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

__all__ = ["LossTally", "TrainOutput", "READ_EVERY"]

#: Batches whose losses are summed on the device before the sum is read as a number.
READ_EVERY = 32


class TrainOutput(NamedTuple):
    """The result of ``Trainer.run()``: ``global_step, training_loss, metrics``."""

    global_step: int
    training_loss: float
    metrics: dict[str, Any]


class LossTally:
    """The sum and count of the training losses of one ``run()``.

    Every :data:`READ_EVERY` batches the sum so far starts its way to the host
    (``start_read``) and the sum started the time before is added up: no read waits for the
    batches just queued on an asynchronous device.
    """

    def __init__(self, to_numeric: Callable[[Any], Any], tracks: bool = True,
                 start_read: Optional[Callable[[Any], Any]] = None) -> None:
        self.to_numeric = to_numeric
        self.start_read = start_read
        self.tracks = tracks
        self.total = 0.0
        self.count = 0
        self._pending: Any = None
        self._pending_count = 0
        self._in_flight: Optional[tuple[Any, int]] = None  # a sum being read, and its batches

    def add(self, loss: Any) -> None:
        """Count one batch's loss (a one-number tensor, undivided by accumulation)."""
        if not self.tracks:
            return
        detach = getattr(loss, "detach", None)
        value = detach() if callable(detach) else loss
        try:
            self._pending = value if self._pending is None else self._pending + value
        except TypeError:  # a loss type without addition: read each one as a number
            self._read()
            self.total += float(self.to_numeric(value))
            self.count += 1
            return
        self._pending_count += 1
        if self._pending_count >= READ_EVERY:
            self._hand_over()

    def _hand_over(self) -> None:
        """Start reading the pending sum; add up the one started before (long done by now)."""
        self._land()
        if self._pending is not None and self.start_read is not None:
            self._in_flight = (self.start_read(self._pending), self._pending_count)
            self._pending, self._pending_count = None, 0
        else:
            self._read()

    def _land(self) -> None:
        if self._in_flight is not None:
            reading, batches = self._in_flight
            self.total += float(reading.result())
            self.count += batches
            self._in_flight = None

    def _read(self) -> None:
        self._land()
        if self._pending is not None:
            self.total += float(self.to_numeric(self._pending))
            self.count += self._pending_count
        self._pending, self._pending_count = None, 0

    def mean(self) -> float:
        """The mean loss so far (NaN when no loss was counted)."""
        self._read()
        return self.total / self.count if self.count else math.nan


def epochs_done(cur_epoch_idx: int, batch_idx_in_epoch: int, num_batches_per_epoch: Optional[int]) -> float:
    """Epochs trained, an open epoch counting its done fraction (transformers' ``epoch``)."""
    if batch_idx_in_epoch and num_batches_per_epoch:
        return cur_epoch_idx + batch_idx_in_epoch / num_batches_per_epoch
    return float(cur_epoch_idx)
