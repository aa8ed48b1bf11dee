"""A Ray training function whose module imports oneflow at the top (tests/distributed/test_ray.py):
Ray loads it in another thread than the one it trains in."""
import oneflow as flow

from fastcore_train import Trainer
from tests.conformance.harnesses.base import initial_weights, make_data


def train_loop(config: dict) -> None:
    from tests.conformance.harnesses.oneflow import Harness

    harness = Harness()
    x, y = make_data(16, seed=4)
    model = harness.make_model(initial_weights())
    Trainer(model, harness.make_dataloader(x, y, 8), flow.optim.SGD(model.parameters(), lr=0.1),
            driver="oneflow", device=None, progress_bar=None)
