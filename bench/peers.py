"""The fastcore_train Trainer against its peers on torch CPU: a hand loop, fastNLP 1.0.1, HF Accelerate, Lightning.

Every contender trains the same MLP (``--model small``: 64-256-256-10, ``large``: 256-1024-1024-10;
SGD lr 0.01, batch 32) on the same seeded data, through the same ``torch.utils.data.DataLoader``,
from the same initial weights (``torch.manual_seed`` before each model is built), with 1 compute
thread. A round is one whole run of every contender (its trainer built, one epoch of
``--batches`` batches trained), in an order that rotates every round; the ratio of each run to
the hand loop's run of the same round is taken, and the table shows its median and spread over
the rounds. ``hand-again`` is a second hand loop: the A/A control, i.e. the noise floor.

After every run the weights are compared with the hand loop's of the same round: all contenders
do the same arithmetic, so they must be bit-identical (a fair race); any that is not is named.
A peer that is not installed is skipped with a note (``pip install -e .[torch,bench]``, or
``tox -e bench``). It is a measurement, not a test: it always exits 0.

    python bench/peers.py [--model small large] [--rounds 7] [--batches 300] [--threads 1]
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import logging
import os
import platform
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MODELS = {"small": (64, 256, 256, 10), "large": (256, 1024, 1024, 10)}
BATCH_SIZE = 32
LR = 0.01
PEERS = {"fastNLP": "fastNLP", "accelerate": "accelerate", "lightning": "lightning"}


def build_mlp(sizes: tuple[int, ...], seed: int = 0) -> Any:
    """The MLP of ``bench/hands/torch.py`` (``train_step(x, y) -> {"loss"}``) with these layer sizes;
    the same weights for the same seed."""
    import torch

    from bench.hands.torch import MLP
    torch.manual_seed(seed)
    return MLP(sizes)


def make_loader_factory(sizes: tuple[int, ...], batches: int, seed: int = 0) -> Callable[[], Any]:
    """A factory of fresh DataLoaders over the same ``{"x", "y"}`` samples."""
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset

    rng = np.random.default_rng(seed)
    n = batches * BATCH_SIZE
    x = torch.from_numpy(rng.standard_normal((n, sizes[0]), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, sizes[-1], size=n, dtype=np.int64))

    class DictDataset(Dataset):
        def __len__(self) -> int:
            return n

        def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
            return {"x": x[index], "y": y[index]}

    dataset = DictDataset()
    return lambda: DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False)


# ---------------------------------------------------------------------- contenders: one whole run each
def run_hand(model: Any, loader: Any) -> None:
    import torch
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model.train()
    for batch in loader:
        loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def run_trainer(model: Any, loader: Any) -> None:
    import torch
    from fastcore_train import Trainer
    Trainer(model=model, train_dataloader=loader, optimizers=torch.optim.SGD(model.parameters(), lr=LR),
            driver="torch", device="cpu", n_epochs=1, progress_bar=None,
            model_summary=False).run(num_eval_sanity_batch=0)


def run_fastnlp(model: Any, loader: Any) -> None:
    import torch
    from fastNLP import Trainer as FastNLPTrainer
    FastNLPTrainer(model=model, train_dataloader=loader, optimizers=torch.optim.SGD(model.parameters(), lr=LR),
                   driver="torch", device="cpu", n_epochs=1,
                   progress_bar=None).run(num_eval_sanity_batch=0)


def run_accelerate(model: Any, loader: Any) -> None:
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    model.train()
    for batch in loader:
        loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def run_lightning(model: Any, loader: Any) -> None:
    import lightning as L
    import torch

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model

        def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(self.net(batch["x"]), batch["y"])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.net.parameters(), lr=LR)

    L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
              ).fit(Module(), train_dataloaders=loader)


RUNS: dict[str, Callable[[Any, Any], None]] = {
    "hand": run_hand, "hand-again": run_hand, "trainer": run_trainer,
    "fastNLP": run_fastnlp, "accelerate": run_accelerate, "lightning": run_lightning,
}


def installed_contenders() -> tuple[list[str], list[str]]:
    """The contenders that can run here, and a note for each peer that cannot."""
    names, notes = ["hand", "hand-again", "trainer"], []
    for name, module in PEERS.items():
        if importlib.util.find_spec(module) is None:
            notes.append(f"{name}: not installed, skipped (pip install -e .[torch,bench], or tox -e bench)")
        else:
            names.append(name)
    return names, notes


def version_of(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    package = {"hand": "torch", "hand-again": "torch", "trainer": "fastcore-train"}.get(name, name)
    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


@contextlib.contextmanager
def quiet() -> Any:
    """The peers' banners and warnings (Lightning's tips, fastNLP's logs) out of the table's way."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def race(sizes: tuple[int, ...], names: list[str], rounds: int, batches: int, warmup: int) -> dict[str, Any]:
    """Interleaved rounds of whole runs; per-round ratios to ``hand`` and the fairness check."""
    import time

    import numpy as np
    loader = make_loader_factory(sizes, batches)
    times: dict[str, list[float]] = {name: [] for name in names}
    unequal: set[str] = set()
    for r in range(warmup + rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order.reverse()
        weights: dict[str, list[Any]] = {}
        for name in order:
            model, data = build_mlp(sizes), loader()
            with quiet():
                started = time.perf_counter()
                RUNS[name](model, data)
                elapsed = time.perf_counter() - started
            weights[name] = [p.detach().numpy().copy() for p in model.parameters()]
            if r >= warmup:
                times[name].append(elapsed)
        unequal.update(name for name in names
                       if not all(np.array_equal(a, b) for a, b in zip(weights[name], weights["hand"])))
    return {"times": times, "unequal": sorted(unequal)}


def print_table(results: dict[str, dict[str, Any]], names: list[str], rounds: int) -> None:
    print(f"  {'model':<22} {'contender':<12} {'median s/run':>12} {'ratio vs hand':>14} {'spread (min-max)':>18}"
          f"  {'weights':>9}")
    for label, result in results.items():
        times, hand = result["times"], result["times"]["hand"]
        for name in names:
            ratios = [t / h for t, h in zip(times[name], hand)]
            same = "differ" if name in result["unequal"] else "identical"
            print(f"  {label:<22} {name:<12} {statistics.median(times[name]):12.3f} {statistics.median(ratios):14.2f} "
                  f"{min(ratios):8.2f} - {max(ratios):<7.2f}  {same:>9}")
    print(f"  (ratio: median over {rounds} rounds of run time / the hand loop's run time in the same round; "
          "weights: bit-identical to the hand loop's or not)")


def parse_args(argv: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", choices=sorted(MODELS), default=["small", "large"],
                        help="MLP sizes: small 64-256-256-10, large 256-1024-1024-10 (default both)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timed rounds (default 7)")
    parser.add_argument("--batches", type=int, default=300, help="batches per run, one epoch (default 300)")
    parser.add_argument("--threads", type=int, default=1, help="torch compute threads (default 1)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    args = parser.parse_args(argv)
    if min(args.rounds, args.batches, args.threads) < 1 or args.warmup < 0:
        parser.error("--rounds, --batches and --threads must be >= 1, --warmup >= 0")
    return args


def main(argv: Any = None) -> int:
    args = parse_args(argv)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    import torch
    torch.set_num_threads(args.threads)
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("fastcore_train").setLevel(logging.WARNING)
    names, notes = installed_contenders()
    with quiet():  # first imports (Lightning's and fastNLP's take seconds) are not timed
        for name in names:
            if name in PEERS:
                __import__(PEERS[name])
    print(f"fastcore_train vs peers: torch {torch.__version__} CPU, {args.threads} thread(s), batch {BATCH_SIZE}, "
          f"SGD lr {LR}, {args.batches} batches/run, {args.rounds} rounds (+{args.warmup} warm-up), "
          f"python {platform.python_version()}, {platform.processor() or platform.machine()}")
    print("versions: " + ", ".join(f"{name} {version_of(name)}" for name in names if name != "hand-again"))
    for note in notes:
        print(f"note: {note}")
    results = {}
    for label in args.model:
        sizes = MODELS[label]
        results[f"{label} {'-'.join(map(str, sizes))}"] = race(sizes, names, args.rounds, args.batches, args.warmup)
    print()
    print_table(results, names, args.rounds)
    print()
    for label, result in results.items():
        verdict = "yes" if not result["unequal"] else "NO: " + ", ".join(result["unequal"]) + " differ"
        print(f"bit-identical weights for every contender ({label}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
