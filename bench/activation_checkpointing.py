"""Peak memory of training with and without ``activation_checkpointing``, per backend.

A deep MLP stack whose activations outweigh its weights (``--blocks`` blocks of
width -> 4*width -> width with GELU, held in a Sequential, batch ``--batch``) trains ``--steps``
SGD steps through the Trainer, once with ``activation_checkpointing=True`` (every block
recomputed in backward) and once without, each in a fresh process. Reported per run: the peak
resident set size (``VmHWM``) over steps 2 to ``--steps``, and how far above the resident set
size after step 1 it went (lazy imports and first allocations are done by then; the peak is reset there through
``/proc/self/clear_refs``, so Linux only), the seconds per step, and the losses, which must be
the same with and without.

It is a measurement, not a test: it always exits 0.

    python bench/activation_checkpointing.py [--backend torch] [--blocks 16] [--width 128] [--batch 4096]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def status_mib(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak since the last reset) of this process in MiB (Linux /proc)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    """Start a new peak RSS (Linux >= 4.0: writing 5 to clear_refs resets VmHWM)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def torch_setup(blocks: int, width: int, x, y, lr: float):
    import torch
    import torch._dynamo  # noqa: F401  (torch's checkpoint imports it at its first call: ~170 MiB in both runs alike)

    class Stack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.Sequential(*[torch.nn.Sequential(
                torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))
                for _ in range(blocks)])
            self.head = torch.nn.Linear(width, 10)

        def train_step(self, x, y):
            return {"loss": torch.nn.functional.cross_entropy(self.head(self.blocks(x)), y)}

    torch.manual_seed(0)
    model = Stack()
    batch = {"x": torch.from_numpy(x), "y": torch.from_numpy(y)}
    return model, torch.optim.SGD(model.parameters(), lr=lr), batch


def paddle_setup(blocks: int, width: int, x, y, lr: float):
    import paddle

    class Stack(paddle.nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = paddle.nn.Sequential(*[paddle.nn.Sequential(
                paddle.nn.Linear(width, 4 * width), paddle.nn.GELU(), paddle.nn.Linear(4 * width, width))
                for _ in range(blocks)])
            self.head = paddle.nn.Linear(width, 10)

        def train_step(self, x, y):
            return {"loss": paddle.nn.functional.cross_entropy(self.head(self.blocks(x)), y)}

    paddle.seed(0)
    model = Stack()
    batch = {"x": paddle.to_tensor(x), "y": paddle.to_tensor(y)}
    return model, paddle.optimizer.SGD(learning_rate=lr, parameters=model.parameters()), batch


def oneflow_setup(blocks: int, width: int, x, y, lr: float):
    import oneflow as flow

    class Stack(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = flow.nn.Sequential(*[flow.nn.Sequential(
                flow.nn.Linear(width, 4 * width), flow.nn.GELU(), flow.nn.Linear(4 * width, width))
                for _ in range(blocks)])
            self.head = flow.nn.Linear(width, 10)

        def train_step(self, x, y):
            return {"loss": flow.nn.functional.cross_entropy(self.head(self.blocks(x)), y)}

    flow.manual_seed(0)
    model = Stack()
    batch = {"x": flow.from_numpy(x), "y": flow.from_numpy(y)}
    return model, flow.optim.SGD(model.parameters(), lr=lr), batch


SETUPS = {"torch": torch_setup, "paddle": paddle_setup, "oneflow": oneflow_setup}


def child(args: argparse.Namespace) -> None:
    """One run in this process: print its figures as one JSON line."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from fastcore_train import Event, Trainer

    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (args.batch, args.width)).astype(np.float32)
    y = rng.integers(0, 10, args.batch).astype(np.int64)
    model, optimizer, batch = SETUPS[args.backend](args.blocks, args.width, x, y, 0.01)
    losses: list[float] = []
    trainer = Trainer(model, [batch] * args.steps, optimizer, driver=args.backend, n_epochs=1, progress_bar=None,
                      model_summary=False, activation_checkpointing=True if args.child == "with" else None)
    trainer.add_callback_fn(Event.on_before_backward(),
                            lambda t, outputs: losses.append(float(t.driver.data.to_numeric(outputs["loss"]))))
    marks: dict[str, float] = {}

    def after_first_step(t) -> None:  # lazy imports and first allocations are done: measure from here
        if t.global_forward_batches == 1:
            marks["rss"] = status_mib("VmRSS")
            reset_peak()
            marks["start"] = time.perf_counter()

    trainer.add_callback_fn(Event.on_train_batch_end(), after_first_step)
    trainer.run(num_eval_sanity_batch=0)
    seconds = (time.perf_counter() - marks["start"]) / (args.steps - 1)
    print(json.dumps({"run": args.child, "peak_mib": status_mib("VmHWM"), "peak_above_start_mib": status_mib("VmHWM") - marks["rss"],
                      "rss_start_mib": marks["rss"], "seconds_per_step": seconds, "losses": losses,
                      "recomputed_layers": len(trainer.activation_checkpointed)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=sorted(SETUPS), default="torch")
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--child", choices=["with", "without"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    results = {}
    for run in ("without", "with"):
        command = [sys.executable, __file__, "--child", run, *sys.argv[1:]]
        # glibc's malloc keeps freed blocks below its (growing) mmap threshold in the heap, so the RSS would
        # also count memory already freed; a fixed threshold returns every large tensor's memory at once.
        env = {"MALLOC_MMAP_THRESHOLD_": "131072", **os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"{run}: failed\n{done.stderr[-3000:]}")
            return
        results[run] = json.loads(lines[-1])
    activations = args.batch * args.blocks * 9 * args.width * 4 / 2**20  # input, 4w hidden, 4w GELU per block
    print(f"{args.backend}: {args.blocks} blocks {args.width}-{4 * args.width}-{args.width}, batch {args.batch}, "
          f"{args.steps} steps (activations kept without checkpointing: ~{activations:.0f} MiB)")
    for run in ("without", "with"):
        figures = results[run]
        print(f"  {run:8s} activation_checkpointing: peak RSS {figures['peak_mib']:6.0f} MiB, "
              f"+{figures['peak_above_start_mib']:5.0f} MiB above {figures['rss_start_mib']:.0f} MiB between steps, {figures['seconds_per_step']:.2f} s/step, "
              f"{figures['recomputed_layers']} layers recomputed")
    same = results["with"]["losses"] == results["without"]["losses"]
    saved = results["without"]["peak_mib"] - results["with"]["peak_mib"]
    print(f"  peak RSS {saved:.0f} MiB lower ({saved / results['without']['peak_mib']:.0%}); losses "
          f"{'identical' if same else 'DIFFER'}: {results['with']['losses']}")


if __name__ == "__main__":
    main()
