"""Memory per rank: one process, 2-rank DDP, 2-rank FSDP2 and 2-rank tensor parallel, on CPU.

Trains a model of 8 ``Linear(width, width)`` layers with ReLUs between them (``--width``: 2048 by
default, 33.6 M parameters, 134 MB in float32; 4096: 134 M, 537 MB) with AdamW for ``--steps``
steps of ``--batch`` samples through the Trainer, in four configurations, each in fresh processes
this script starts (it runs itself with ``--worker NAME``):

* ``1 process``: ``driver="torch"``, ``device="cpu"``;
* ``DDP``: ``driver="torch"``, ``device=["cpu", "cpu"]``;
* ``FSDP2``: ``driver="torch_model_parallel"`` with ``tp_size=1`` (dp=2), every ``Linear`` its own
  ``fully_shard`` unit (``fsdp_layers``);
* ``TP``: ``driver="torch_model_parallel"`` with ``tp_size=2`` (dp=1), the layers alternately
  ``"colwise"`` and ``"rowwise"`` (a Megatron pair: no communication between the two).

Each rank measures, just before its last optimizer step (the gradients are there, the optimizer
state exists from the steps before): the bytes of its parameters, gradients and optimizer state
as it holds them (a DTensor counts its local shard), and its peak resident set size
(``ru_maxrss``) at the end; also the RSS of the runtime alone (interpreter, torch, this package
and the driver's imports, before any model exists: every rank pays it) and each step's loss (equal
to one process's, meta builds included). Printed as a markdown table, the larger of the two ranks'
figures. ``fsdp2_meta`` and ``tp_meta`` build the model under ``torch.device("meta")`` and each rank
reads only its shards of the same initial weights (``init_weights``): no rank holds the whole model.

The width matters to FSDP2's peak: a layer's all-gather and reduce-scatter buffers are as large as
the layer (16.8 MB at 2048), below the 32 MB that glibc's dynamic mmap threshold can grow to, so
once freed they stay in glibc's heaps and the peak keeps them (1.15 of one process at 2048); from
4096 on (67 MB buffers) glibc maps them and hands them back when freed, with no allocator setting.
What is left above half of one process is the runtime each rank pays and the layer FSDP2 gathers
while it computes. docs/performance.md has the figures at 2048, 4096 and 6144.

Under the table, each sharded configuration against the goal (peak per rank at most 0.6 of one
process's), beside the floor that a rank's runtime sets at this width: no 2-way sharding can go
below its runtime plus half of what one process holds above its own (0.67 at 2048: the goal is
out of reach there; 0.56 at 4096, 0.53 at 6144).

It is a measurement, not a test: it always exits 0.

    python bench/memory.py [--steps 3] [--batch 16] [--width 2048] [--only fsdp2 tp ...]
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

WIDTH, LAYERS = 2048, 8  # the default width; --width changes it
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
# the same two, the model built on the meta device: each rank reads only its shards of the initial weights
CONFIGS["fsdp2_meta"] = ("2-rank FSDP2, meta build", *CONFIGS["fsdp2"][1:])
CONFIGS["tp_meta"] = ("2-rank tensor parallel, meta build", *CONFIGS["tp"][1:])
#: The sharded configurations, set against TARGET under the table.
SHARDED_LABELS = {CONFIGS[name][0] for name in CONFIGS if name.startswith(("fsdp2", "tp"))}
INITIAL = "initial.safetensors"
TARGET = 0.6  # the goal for a sharded rank's peak RSS over one process's, at 2 ranks
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


def stack_class(width: int = WIDTH):
    """The measured model's class: ``LAYERS`` layers of ``Linear(width, width)`` (torch is imported
    only where it is built)."""
    import torch

    class Stack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(LAYERS))

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x)
                x = torch.relu(x) if i < LAYERS - 1 else x
            return x

        def train_step(self, x, y):
            return {"loss": torch.nn.functional.mse_loss(self(x), y)}

    return Stack


def write_initial_weights(out: Path, width: int) -> None:
    """The seeded initial weights, for the meta builds to read their shards from."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    save_file(stack_class(width)().state_dict(), str(out / INITIAL))


def worker(name: str, out: Path, steps: int, batch: int, width: int) -> None:
    import torch
    from torch.utils.data import DataLoader, Dataset

    from fastcore_train import Callback, Trainer

    Stack = stack_class(width)

    class Samples(Dataset):
        def __len__(self):
            return steps * batch * 2

        def __getitem__(self, index):
            generator = torch.Generator().manual_seed(index)
            return {"x": torch.randn(width, generator=generator), "y": torch.randn(width, generator=generator)}

    class Measure(Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_before_backward(self, trainer, outputs):
            self.losses.append(float(outputs["loss"]))

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
    if driver == "torch_model_parallel":  # what the driver imports, counted in the runtime, not the model
        import torch.distributed.fsdp  # noqa: F401
        import torch.distributed.tensor.parallel  # noqa: F401
    runtime = current_rss()  # the interpreter, torch and this package, before any model exists
    torch.manual_seed(0)
    if name.endswith("_meta"):
        with torch.device("meta"):
            model = Stack()
        options = dict(kwargs["torch_model_parallel_kwargs"], init_weights=str(out / INITIAL))
        kwargs = {"torch_model_parallel_kwargs": options}
    else:
        model = Stack()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    measure = Measure()
    ranks = 1 if device == "cpu" else len(device)
    trainer = Trainer(model, DataLoader(Samples(), batch_size=batch // ranks * (2 if name.startswith("tp") else 1)),
                      optimizer, driver=driver, device=device, n_batches=steps, progress_bar=None,
                      callbacks=[measure], **kwargs)
    trainer.run(num_eval_sanity_batch=0)
    rank = trainer.driver.comm.rank
    figures = dict(measure.figures, peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                   losses=measure.losses, runtime=runtime)
    (out / f"{name}_{rank}.json").write_text(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16, help="samples per step, over all data-parallel ranks")
    parser.add_argument("--width", type=int, default=WIDTH, help=f"each Linear is width x width (default {WIDTH})")
    parser.add_argument("--only", nargs="*", choices=list(CONFIGS), help="run only these configurations")
    parser.add_argument("--worker")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Path(args.out), args.steps, args.batch, args.width)
        return
    import torch

    params = LAYERS * (args.width * args.width + args.width)
    print(f"# {LAYERS} x Linear({args.width}, {args.width}): {params / 1e6:.1f} M parameters, "
          f"{params * 4 / MB:.0f} MB; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, "
          f"torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    rows = []
    with tempfile.TemporaryDirectory() as out:
        if any(name.endswith("_meta") for name in (args.only or CONFIGS)):
            write_initial_weights(Path(out), args.width)
        for name, (label, *_rest) in CONFIGS.items():
            if args.only and name not in args.only:
                continue
            command = [sys.executable, __file__, "--worker", name, "--out", out, "--steps", str(args.steps),
                       "--batch", str(args.batch), "--width", str(args.width)]
            done = subprocess.run(command, capture_output=True, text=True)
            files = sorted(Path(out).glob(f"{name}_*.json"))
            if done.returncode != 0 or not files:
                print(f"{label}: failed ({done.returncode})\n{done.stderr[-3000:]}")
                continue
            ranks = [json.loads(path.read_text()) for path in files]
            figures = {key: max(rank[key] for rank in ranks) for key in ranks[0] if key != "losses"}
            # the loss of each step over the whole batch: the mean of the data-parallel ranks' halves
            figures["losses"] = [sum(step) / len(step) for step in zip(*(rank["losses"] for rank in ranks))]
            if "tp" in name:  # a tensor-parallel group computes one batch: every rank has its loss
                figures["losses"] = ranks[0]["losses"]
            rows.append((label, len(ranks), figures))
    single = next((figures for label, _, figures in rows if label == CONFIGS["single"][0]), None)
    print("| configuration | ranks | parameters | gradients | optimizer state | RSS at the last step | peak RSS | "
          "peak / 1 process | runtime | peak above the runtime / 1 process's | losses as 1 process |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for label, count, figures in rows:
        ratio = f"{peak_ratio(figures, single):.2f}" if single else "-"
        above = (f"{(figures['peak_rss'] - figures['runtime']) / (single['peak_rss'] - single['runtime']):.2f}"
                 if single else "-")
        same = "-" if single is None else "yes" if all(
            abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(figures["losses"], single["losses"])) else (
            f"no ({figures['losses']} vs {single['losses']})")
        print(f"| {label} | {count} | {figures['params'] / MB:.1f} MB | {figures['grads'] / MB:.1f} MB | "
              f"{figures['optimizer'] / MB:.1f} MB | {figures['rss'] / MB:.0f} MB | {figures['peak_rss'] / MB:.0f} MB | "
              f"{ratio} | {figures['runtime'] / MB:.0f} MB | {above} | {same} |")
    if single is not None:
        print_target(single, [(label, figures) for label, _count, figures in rows if label in SHARDED_LABELS])


def peak_ratio(figures: dict, single: dict) -> float:
    """A configuration's peak RSS per rank over one process's."""
    return figures["peak_rss"] / single["peak_rss"]


def floor_ratio(single: dict, sharded_runtime: float) -> float:
    """The least peak per rank, over one process's peak, that any 2-way sharding could reach at this
    width: the runtime a sharded rank pays plus half of all one process holds above its own runtime."""
    return (sharded_runtime + (single["peak_rss"] - single["runtime"]) / 2) / single["peak_rss"]


def print_target(single: dict, sharded: list[tuple[str, dict]]) -> None:
    """The goal (peak per rank <= ``TARGET`` of one process's) for each sharded configuration, beside
    the floor that the runtime alone sets at this width (at a small width it is above the target)."""
    if not sharded:
        return
    runtime = max(figures["runtime"] for _label, figures in sharded)
    floor = floor_ratio(single, runtime)
    print(f"\ntarget: peak RSS per rank <= {TARGET} of one process's. Floor at this width: {floor:.2f} (a rank's "
          f"runtime, {runtime / MB:.0f} MB, plus half of the {(single['peak_rss'] - single['runtime']) / MB:.0f} MB "
          f"one process holds above its runtime, over its peak); "
          + ("the target is reachable here." if floor <= TARGET else
             "no 2-way sharding can reach the target at this width: the runtime dominates (try --width 6144)."))
    for label, figures in sharded:
        ratio = peak_ratio(figures, single)
        print(f"  {label}: {ratio:.2f} {'PASS' if ratio <= TARGET else 'MISS'}")


if __name__ == "__main__":
    main()
