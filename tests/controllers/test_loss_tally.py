"""The training-loss tally reads each sum one period late, so that no read waits for the batches
just queued on an asynchronous device; the mean is exact all the same."""
from __future__ import annotations

import math

from fastcore_train.controllers.train_output import READ_EVERY, LossTally
from fastcore_train.drivers.data import DataAdapter


class Recorded(DataAdapter):
    """The neutral data adapter, recording when each read starts and when it lands."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, float]] = []

    def start_read(self, value):
        self.events.append(("start", value))
        pending = super().start_read(value)
        read = pending._read

        def landed(v):
            self.events.append(("land", v))
            return read(v)

        pending._read = landed
        return pending


def test_each_sum_is_read_one_period_late_and_the_mean_is_exact():
    data = Recorded()
    tally = LossTally(data.to_numeric, start_read=data.start_read)
    losses = [float(i % 7) for i in range(3 * READ_EVERY + 5)]
    for step, loss in enumerate(losses, start=1):
        tally.add(loss)
        if step == READ_EVERY:  # the first sum starts its way; nothing lands yet
            assert data.events == [("start", sum(losses[:READ_EVERY]))]
        if step == 2 * READ_EVERY:  # the first lands only when the second starts
            assert [kind for kind, _ in data.events] == ["start", "land", "start"]
    assert math.isclose(tally.mean(), sum(losses) / len(losses))
    assert tally.count == len(losses)


def test_no_loss_is_nan():
    assert math.isnan(LossTally(DataAdapter().to_numeric).mean())
