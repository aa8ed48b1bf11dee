"""A job for the two-host tests: docs/multinode.md's script, recording what each rank did.

Usage (under a launcher, on each host): two_hosts_job.py OUT BATCH [FRAMEWORK [COLLECTIVE_TIMEOUT]]. Trains the page's
Regression (in FRAMEWORK: torch, the default, paddle or oneflow) on 512 fixed samples, 2 epochs,
batch BATCH per rank (device=None: the launcher's ranks); each rank writes OUT/rank_<r>.json: its
batches, world size, the interface variables it ran with, the TCP connections it held
(local and remote address) at its first epoch's end, and its weights. Run with no launcher it
is the one-process reference.
"""
import importlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fastcore_train import Callback, Trainer, seed_everything  # noqa: E402 (before oneflow: it reads the launcher's variables)
from tests.distributed.listening import connected_addresses  # noqa: E402

SAMPLES = np.random.default_rng(0).standard_normal((512, 8)).astype("float32")


def torch_parts(batch: int):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class Regression(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 1)

        def train_step(self, x, y):
            return {"loss": torch.nn.functional.mse_loss(self.linear(x).squeeze(-1), y)}

    model = Regression()
    x = torch.tensor(SAMPLES)
    loader = DataLoader(TensorDataset(x, x.sum(-1)), batch_size=batch, shuffle=True)
    return model, loader, torch.optim.SGD(model.parameters(), lr=0.05)


def oneflow_parts(batch: int):
    import oneflow as flow
    from oneflow.utils.data import DataLoader, TensorDataset

    class Regression(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = flow.nn.Linear(8, 1)

        def train_step(self, x, y):
            return {"loss": flow.nn.functional.mse_loss(self.linear(x).squeeze(-1), y)}

    model = Regression()
    x = flow.tensor(SAMPLES)
    loader = DataLoader(TensorDataset(x, x.sum(-1)), batch_size=batch, shuffle=True)
    return model, loader, flow.optim.SGD(model.parameters(), lr=0.05)


def paddle_parts(batch: int):
    import paddle
    from paddle.io import DataLoader, Dataset

    class Samples(Dataset):
        def __len__(self):
            return len(SAMPLES)

        def __getitem__(self, index):
            return SAMPLES[index], SAMPLES[index].sum(-1)

    class Regression(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.linear = paddle.nn.Linear(8, 1)

        def train_step(self, x, y):
            return {"loss": paddle.nn.functional.mse_loss(self.linear(x).squeeze(-1), y)}

    model = Regression()
    loader = DataLoader(Samples(), batch_size=batch, shuffle=True)
    return model, loader, paddle.optimizer.SGD(learning_rate=0.05, parameters=model.parameters())


def jittor_parts(batch: int):
    import jittor as jt
    from jittor.dataset import Dataset

    class Samples(Dataset):
        def __init__(self):
            super().__init__()
            self.set_attrs(total_len=len(SAMPLES), batch_size=batch, shuffle=True)

        def __getitem__(self, index):
            return SAMPLES[index], np.asarray(SAMPLES[index].sum(-1))

    class Regression(jt.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = jt.nn.Linear(8, 1)

        def train_step(self, x, y):
            return {"loss": jt.nn.mse_loss(self.linear(x).squeeze(-1), y)}

    model = Regression()
    return model, Samples(), jt.optim.SGD(model.parameters(), lr=0.05)


class Connections(Callback):
    """The TCP connections this rank holds at its first epoch's end (its framework's transports are up)."""

    def __init__(self):
        self.seen = set()

    def on_train_epoch_end(self, trainer):
        if not self.seen:
            self.seen = connected_addresses(os.getpid())


def main(out: Path, batch: int, framework: str = "torch", collective_timeout: float = 600.0) -> None:
    importlib.import_module(framework)  # seed_everything seeds the frameworks imported by then
    seed_everything(0)
    model, loader, optimizer = globals()[f"{framework}_parts"](batch)
    connections = Connections()
    trainer = Trainer(model, loader, optimizer, device=None, n_epochs=2, input_mapping={0: "x", 1: "y"},
                      progress_bar=None, callbacks=[connections],
                      collective_timeout=collective_timeout)
    trainer.run(num_eval_sanity_batch=0)
    comm = trainer.driver.comm
    Path(out, f"rank_{comm.rank}.json").write_text(json.dumps({
        "rank": comm.rank, "world_size": comm.world_size, "batches": trainer.global_forward_batches,
        "interfaces": {name: os.environ.get(name) for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")}, "connections": sorted(connections.seen),
        "weights": {name: np.asarray(value.numpy() if hasattr(value, "numpy") else value).tolist()
                    for name, value in model.state_dict().items()}}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:4], *map(float, sys.argv[4:5]))
