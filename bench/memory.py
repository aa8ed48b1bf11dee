"""Memory per rank: one process, 2-rank DDP, 2-rank FSDP2 and 2-rank tensor parallel, on CPU.

Trains a model of 8 ``Linear(2048, 2048)`` layers with ReLUs between them (33.6 M parameters,
134 MB in float32) with AdamW for ``--steps`` steps of ``--batch`` samples through the Trainer,
in four configurations, each in fresh processes this script starts (it runs itself with
``--worker NAME``):

* ``1 process``: ``driver="torch"``, ``device="cpu"``;
* ``DDP``: ``driver="torch"``, ``device=["cpu", "cpu"]``;
* ``FSDP2``: ``driver="torch_model_parallel"`` with ``tp_size=1`` (dp=2), every ``Linear`` its own
  ``fully_shard`` unit (``fsdp_layers``);
* ``TP``: ``driver="torch_model_parallel"`` with ``tp_size=2`` (dp=1), the layers alternately
  ``"colwise"`` and ``"rowwise"`` (a Megatron pair: no communication between the two).

Each rank measures, just before its last optimizer step (the gradients are there, the optimizer
state exists from the steps before): the bytes of its parameters, gradients and optimizer state
as it holds them (a DTensor counts its local shard), and its peak resident set size
(``ru_maxrss``) at the end. Printed as a markdown table, the larger of the two ranks' figures.

It is a measurement, not a test: it always exits 0.

    python bench/memory.py [--steps 3] [--batch 16]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

WIDTH, LAYERS = 2048, 8
CONFIGS = {  # name -> (label, driver, device, driver kwargs)
    "single": ("1 process", "torch", "cpu", {}),
    "ddp": ("2-rank DDP", "torch", ["cpu", "cpu"], {}),
    "fsdp2": ("2-rank FSDP2", "torch_model_parallel", ["cpu", "cpu"],
              {"torch_model_parallel_kwargs": {"tp_size": 1, "fsdp_layers": ["Linear"]}}),
    "tp": ("2-rank tensor parallel", "torch_model_parallel", ["cpu", "cpu"],
           {"torch_model_parallel_kwargs": {"tp_size": 2,
                                            "tp_plan": {f"layers.{i}": "colwise" if i % 2 == 0 else "rowwise"
                                                        for i in range(LAYERS)}}}),
}
MB = 1e6


def local_bytes(tensor) -> int:
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def current_rss() -> int:
    """This process's resident set size now, in bytes (Linux), after ``malloc_trim(0)`` has handed
    back the heap pages glibc keeps after frees (what the process really holds, not what it held)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: the untrimmed figure
        pass
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def worker(name: str, out: Path, steps: int, batch: int) -> None:
    import torch
    from torch.utils.data import DataLoader, Dataset

    from fastcore_train import Callback, Trainer

    class Stack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS))

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x)
                x = torch.relu(x) if i < LAYERS - 1 else x
            return x

        def train_step(self, x, y):
            return {"loss": torch.nn.functional.mse_loss(self(x), y)}

    class Samples(Dataset):
        def __len__(self):
            return steps * batch * 2

        def __getitem__(self, index):
            generator = torch.Generator().manual_seed(index)
            return {"x": torch.randn(WIDTH, generator=generator), "y": torch.randn(WIDTH, generator=generator)}

    class Measure(Callback):
        def on_before_optimizers_step(self, trainer, optimizers):
            model = trainer.driver.unwrap_model()
            self.figures = {
                "params": sum(local_bytes(p) for p in model.parameters()),
                "grads": sum(local_bytes(p.grad) for p in model.parameters() if p.grad is not None),
                "optimizer": sum(local_bytes(v) for o in trainer.driver.optimizers for state in o.state.values()
                                 for v in state.values() if isinstance(v, torch.Tensor)),
                "rss": current_rss(),
            }

    label, driver, device, kwargs = CONFIGS[name]
    torch.manual_seed(0)
    model = Stack()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    measure = Measure()
    ranks = 1 if device == "cpu" else len(device)
    trainer = Trainer(model, DataLoader(Samples(), batch_size=batch // ranks * (2 if name == "tp" else 1)),
                      optimizer, driver=driver, device=device, n_batches=steps, progress_bar=None,
                      callbacks=[measure], **kwargs)
    trainer.run(num_eval_sanity_batch=0)
    rank = trainer.driver.comm.rank
    figures = dict(measure.figures, peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    (out / f"{name}_{rank}.json").write_text(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16, help="samples per step, over all data-parallel ranks")
    parser.add_argument("--only", nargs="*", choices=list(CONFIGS), help="run only these configurations")
    parser.add_argument("--worker")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Path(args.out), args.steps, args.batch)
        return
    import torch

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, "
          f"torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for name, (label, *_rest) in CONFIGS.items():
            if args.only and name not in args.only:
                continue
            done = subprocess.run([sys.executable, __file__, "--worker", name, "--out", out, "--steps", str(args.steps),
                                   "--batch", str(args.batch)], capture_output=True, text=True)
            files = sorted(Path(out).glob(f"{name}_*.json"))
            if done.returncode != 0 or not files:
                print(f"{label}: failed ({done.returncode})\n{done.stderr[-3000:]}")
                continue
            ranks = [json.loads(path.read_text()) for path in files]
            rows.append((label, len(ranks), {key: max(rank[key] for rank in ranks) for key in ranks[0]}))
    print("| configuration | ranks | parameters | gradients | optimizer state | RSS at the last step | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, count, figures in rows:
        print(f"| {label} | {count} | {figures['params'] / MB:.1f} MB | {figures['grads'] / MB:.1f} MB | "
              f"{figures['optimizer'] / MB:.1f} MB | {figures['rss'] / MB:.0f} MB | {figures['peak_rss'] / MB:.0f} MB |")


if __name__ == "__main__":
    main()
