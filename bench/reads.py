"""Device-to-host reads the Trainer makes per 100 training batches, at its default settings.

Every value the Trainer reads from the device goes through its driver's ``driver.data``
(``to_numeric``/``to_numpy``), which counts them; on an asynchronous device (CUDA, oneflow's
runtime) each read waits for the work queued before it. This trains ``bench/hands``' MLP for
``--batches`` batches through ``Trainer.run()`` with the defaults (progress display, NaN guard,
training-loss tally) and prints the reads per 100 batches, per backend. On torch a
``TorchFunctionMode`` also counts the tensor methods that read (``item``, ``tolist``, ``numpy``,
``__float__``...), wherever they are called from, as a cross-check.

    python bench/reads.py --backend torch [--batches 400]

It is a measurement, not a test: it always exits 0.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.hands import load  # noqa: E402
from fastcore_train import Callback, Trainer  # noqa: E402

TORCH_READS = {"item", "tolist", "numpy", "__float__", "__int__", "__bool__", "cpu"}


class CountReads(Callback):
    """``driver.data``'s read count over the training batches only (not set-up, not the end)."""

    def __init__(self) -> None:
        self.at_begin = self.at_end = 0

    def on_train_begin(self, trainer: Any) -> None:
        self.at_begin = trainer.driver.data.reads

    def on_train_end(self, trainer: Any) -> None:
        self.at_end = trainer.driver.data.reads


def torch_read_counter() -> Any:
    """A mode counting torch's tensor methods that copy a value to the host, by name."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Reads(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.counts: dict[str, int] = {}

        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if name in TORCH_READS and args and isinstance(args[0], torch.Tensor):
                self.counts[name] = self.counts.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    return Reads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--batches", type=int, default=400)
    args = parser.parse_args()
    hands = load(args.backend)
    loader, model_and_optimizer = hands.build_task(args.batches)
    model, optimizer = model_and_optimizer()
    counter = CountReads()
    trainer = Trainer(model, loader(), optimizer, n_epochs=1, callbacks=[counter], **hands.TRAINER_KWARGS)
    torch_mode = torch_read_counter() if args.backend == "torch" else None
    if torch_mode is not None:
        with torch_mode:
            trainer.run(num_eval_sanity_batch=0)
    else:
        trainer.run(num_eval_sanity_batch=0)
    batches = trainer.global_forward_batches
    reads = counter.at_end - counter.at_begin
    line = f"{args.backend}: {reads} reads through driver.data in {batches} batches = {100 * reads / batches:.2f} per 100"
    if torch_mode is not None:
        total = sum(torch_mode.counts.values())
        line += f"; torch tensor reads, everything counted: {100 * total / batches:.2f} per 100 ({torch_mode.counts})"
    print(line)


if __name__ == "__main__":
    main()
