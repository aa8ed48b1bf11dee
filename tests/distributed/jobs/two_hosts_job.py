"""A job for the two-host tests: docs/multinode.md's script, recording what each rank did.

Usage (under a launcher, on each host): two_hosts_job.py OUT BATCH [COLLECTIVE_TIMEOUT]. Trains the page's Regression on
512 fixed samples, 2 epochs, batch BATCH per rank (device=None: the launcher's ranks); each rank
writes OUT/rank_<r>.json: its batches, world size, the interface variables it ran with, and its weights.
Run with no launcher it is the one-process reference.
"""
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from fastcore_train import Trainer, seed_everything  # noqa: E402


class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)

    def train_step(self, x, y):
        return {"loss": torch.nn.functional.mse_loss(self.linear(x).squeeze(-1), y)}


def main(out: Path, batch: int, collective_timeout: float = 600.0) -> None:
    seed_everything(0)
    x = torch.randn(512, 8, generator=torch.Generator().manual_seed(0))
    model = Regression()
    trainer = Trainer(model, DataLoader(TensorDataset(x, x.sum(-1)), batch_size=batch, shuffle=True),
                      torch.optim.SGD(model.parameters(), lr=0.05), device=None, n_epochs=2,
                      input_mapping={0: "x", 1: "y"}, progress_bar=None,
                      collective_timeout=collective_timeout)
    trainer.run(num_eval_sanity_batch=0)
    comm = trainer.driver.comm
    Path(out, f"rank_{comm.rank}.json").write_text(json.dumps({
        "rank": comm.rank, "world_size": comm.world_size, "batches": trainer.global_forward_batches,
        "gloo_interface": os.environ.get("GLOO_SOCKET_IFNAME"),
        "weights": {name: value.tolist() for name, value in model.state_dict().items()}}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:4]))
