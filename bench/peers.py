"""The fastcore_train Trainer against its peers on torch CPU: a hand loop, fastNLP 1.0.1, HF Accelerate, Lightning.

Every contender trains the same model on the same seeded data, through the same
``torch.utils.data.DataLoader``, from the same initial weights (``torch.manual_seed`` before each
model is built), with 1 compute thread. Models: ``--model small`` (MLP 64-256-256-10) and
``large`` (256-1024-1024-10), SGD lr 0.01, batch 32; and the three workloads of
``bench/models.py`` (``cnn``, ``transformer``, ``loader``: see ``bench/hands/workloads.py``),
with their own loss, optimizer, batch size and loader workers. Every run starts from the same
torch seed, so dropout (the CNN's) draws the same numbers where the trainer does not reseed. A round is one whole run of every contender (its trainer built, one epoch of
``--batches`` batches trained), in an order that rotates every round; the ratio of each run to
the hand loop's run of the same round is taken, and the table shows its median and spread over
the rounds. ``hand-again`` is a second hand loop: the A/A control, i.e. the noise floor.

After every run the weights are compared with the hand loop's of the same round: all contenders
do the same arithmetic, so they must be bit-identical (a fair race); any that is not is named.
A peer that is not installed is skipped with a note (``pip install -e .[torch,bench]``, or
``tox -e bench``). It is a measurement, not a test: it always exits 0.

    python bench/peers.py [--model small large] [--rounds 7] [--batches 300] [--threads 1]
    python bench/peers.py --model cnn transformer loader [--batches N]
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MODELS = {"small": (64, 256, 256, 10), "large": (256, 1024, 1024, 10)}
WORKLOADS = ("cnn", "transformer", "loader")  # bench/hands/workloads.py
BATCH_SIZE = 32
LR = 0.01
MLP_BATCHES = 300
SEED = 0


@dataclass(frozen=True)
class Task:
    """One model to race: fresh models (same weights) and loaders (same samples), and its recipe."""

    label: str
    model: Callable[[], Any]
    loader: Callable[[], Any]
    optimizer: Callable[[Any], Any]
    loss: Callable[[Any, Any], Any]
    keys: tuple[str, str] = ("x", "y")


def mlp_task(name: str, batches: int) -> Task:
    """The MLP ``name`` (small or large), SGD lr 0.01, cross-entropy, batch 32."""
    import torch
    sizes = MODELS[name]
    return Task(f"{name} {'-'.join(map(str, sizes))}", lambda: build_mlp(sizes), make_loader_factory(sizes, batches),
                lambda model: torch.optim.SGD(model.parameters(), lr=LR), torch.nn.functional.cross_entropy)


def workload_task(name: str, batches: int) -> Task:
    """A workload of ``bench/models.py``, built by ``bench/hands/torch.py``."""
    from bench.hands import torch as hands
    from bench.hands import workloads
    workload = workloads.get(name)
    loader = hands.make_loader(workloads.columns(workload, batches, SEED), workload.batch_size, workload.workers,
                               workload.transform)
    return Task(f"{name} ({batches} batches of {workload.batch_size}, {workload.workers} workers)",
                lambda: hands.build_model(workload, SEED), loader,
                lambda model: hands.make_optimizer(workload.optimizer, model, workload.lr),
                hands.LOSSES[workload.loss], workload.keys)


def make_task(name: str, batches: int | None) -> Task:
    if name in MODELS:
        return mlp_task(name, batches or MLP_BATCHES)
    from bench.hands.workloads import DEFAULT_BATCHES
    return workload_task(name, batches or DEFAULT_BATCHES[name])
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
def run_hand(model: Any, loader: Any, task: Task) -> None:
    optimizer, loss_fn, (inputs, target) = task.optimizer(model), task.loss, task.keys
    model.train()
    for batch in loader:
        loss = loss_fn(model(batch[inputs]), batch[target])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def run_trainer(model: Any, loader: Any, task: Task) -> None:
    from fastcore_train import Trainer
    Trainer(model=model, train_dataloader=loader, optimizers=task.optimizer(model),
            driver="torch", device="cpu", n_epochs=1, progress_bar=None,
            model_summary=False).run(num_eval_sanity_batch=0)


def run_fastnlp(model: Any, loader: Any, task: Task) -> None:
    from fastNLP import Trainer as FastNLPTrainer
    FastNLPTrainer(model=model, train_dataloader=loader, optimizers=task.optimizer(model),
                   driver="torch", device="cpu", n_epochs=1,
                   progress_bar=None).run(num_eval_sanity_batch=0)


def run_accelerate(model: Any, loader: Any, task: Task) -> None:
    from accelerate import Accelerator
    accelerator = Accelerator(cpu=True)
    loss_fn, (inputs, target) = task.loss, task.keys
    model, optimizer, loader = accelerator.prepare(model, task.optimizer(model), loader)
    model.train()
    for batch in loader:
        loss = loss_fn(model(batch[inputs]), batch[target])
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def run_lightning(model: Any, loader: Any, task: Task) -> None:
    import lightning as L
    import torch
    loss_fn, (inputs, target) = task.loss, task.keys

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model

        def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
            return loss_fn(self.net(batch[inputs]), batch[target])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return task.optimizer(self.net)

    L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
              ).fit(Module(), train_dataloaders=loader)


RUNS: dict[str, Callable[[Any, Any, Task], None]] = {
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


def race(task: Task, names: list[str], rounds: int, warmup: int) -> dict[str, Any]:
    """Interleaved rounds of whole runs; per-round ratios to ``hand`` and the fairness check."""
    import time

    import numpy as np
    import torch
    times: dict[str, list[float]] = {name: [] for name in names}
    unequal: set[str] = set()
    for r in range(warmup + rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order.reverse()
        weights: dict[str, list[Any]] = {}
        for name in order:
            model, data = task.model(), task.loader()
            torch.manual_seed(SEED)  # every run draws the same random numbers (dropout), bar reseeding
            with quiet():
                started = time.perf_counter()
                RUNS[name](model, data, task)
                elapsed = time.perf_counter() - started
            weights[name] = [p.detach().numpy().copy() for p in model.parameters()]
            if r >= warmup:
                times[name].append(elapsed)
        unequal.update(name for name in names
                       if not all(np.array_equal(a, b) for a, b in zip(weights[name], weights["hand"])))
    return {"times": times, "unequal": sorted(unequal)}


def print_table(results: dict[str, dict[str, Any]], names: list[str], rounds: int) -> None:
    width = max(22, *(len(label) for label in results))
    print(f"  {'model':<{width}} {'contender':<12} {'median s/run':>12} {'ratio vs hand':>14} {'spread (min-max)':>18}"
          f"  {'weights':>9}")
    for label, result in results.items():
        times, hand = result["times"], result["times"]["hand"]
        for name in names:
            ratios = [t / h for t, h in zip(times[name], hand)]
            same = "differ" if name in result["unequal"] else "identical"
            print(f"  {label:<{width}} {name:<12} {statistics.median(times[name]):12.3f} {statistics.median(ratios):14.2f} "
                  f"{min(ratios):8.2f} - {max(ratios):<7.2f}  {same:>9}")
    print(f"  (ratio: median over {rounds} rounds of run time / the hand loop's run time in the same round; "
          "weights: bit-identical to the hand loop's or not)")


def parse_args(argv: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", choices=[*MODELS, *WORKLOADS], default=["small", "large"],
                        help="MLP sizes: small 64-256-256-10, large 256-1024-1024-10 (default both); the "
                             "workloads of bench/models.py: cnn, transformer, loader")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timed rounds (default 7)")
    parser.add_argument("--batches", type=int, default=None,
                        help="batches per run, one epoch (default: 300 for the MLPs, bench/models.py's for the others)")
    parser.add_argument("--threads", type=int, default=1, help="torch compute threads (default 1)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    args = parser.parse_args(argv)
    if min(args.rounds, args.batches or 1, args.threads) < 1 or args.warmup < 0:
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
    print(f"fastcore_train vs peers: torch {torch.__version__} CPU, {args.threads} thread(s), MLPs: batch {BATCH_SIZE}, "
          f"SGD lr {LR}, {args.batches or MLP_BATCHES} batches/run; {args.rounds} rounds (+{args.warmup} warm-up), "
          f"python {platform.python_version()}, {platform.processor() or platform.machine()}")
    print("versions: " + ", ".join(f"{name} {version_of(name)}" for name in names if name != "hand-again"))
    for note in notes:
        print(f"note: {note}")
    results = {}
    for name in args.model:
        task = make_task(name, args.batches)
        results[task.label] = race(task, names, args.rounds, args.warmup)
    print()
    print_table(results, names, args.rounds)
    print()
    for label, result in results.items():
        verdict = "yes" if not result["unequal"] else "NO: " + ", ".join(result["unequal"]) + " differ"
        print(f"bit-identical weights for every contender ({label}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
