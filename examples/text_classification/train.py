"""Train the transformer text classifier on the shipped synthetic corpus with any backend.

    python examples/text_classification/train.py --driver paddle

One recipe on every framework: the same initial weights (``architecture.initial_weights``), the
same order of batches (the Trainer swaps each framework's shuffling for its own seeded sampler,
which does not depend on the framework), Adam with the same settings, no dropout. Only the
dataloaders and the optimizer are built per framework (:data:`FRAMEWORK_PARTS`). ``--out`` gets
``loss.csv`` (every batch's training loss) and ``metrics.json`` (the test accuracy after each
epoch, the recipe, the versions); ``plot_curves.py`` draws several runs' losses in one picture.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere: the repository root holds ``examples``
    sys.path.insert(0, str(ROOT))

from examples.text_classification import corpus, models  # noqa: E402
from examples.text_classification.architecture import ClassifierConfig  # noqa: E402
from fastcore_train import Accuracy, Callback, Trainer  # noqa: E402

EVALUATE_BATCH_SIZE = 250


class Rows:
    """Samples ``{"tokens": ids (64,), "label": topic}`` of a :class:`corpus.Split` (mixed into each
    framework's Dataset class)."""

    split: corpus.Split

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"tokens": self.split.tokens[index], "label": self.split.labels[index]}

    def __len__(self) -> int:
        return len(self.split.labels)


# ---------------------------------------------------------------- the per-framework part
# Each returns (train loader, test loader, Adam over the model); shuffle=True is all the train
# loader says about order: the Trainer replaces it with its seeded, framework-free sampler.

def _torch_parts(model: Any, train: corpus.Split, test: corpus.Split, batch_size: int, lr: float):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Data(Rows, Dataset):
        def __init__(self, split: corpus.Split) -> None:
            self.split = split

    return (DataLoader(Data(train), batch_size=batch_size, shuffle=True),
            DataLoader(Data(test), batch_size=EVALUATE_BATCH_SIZE),
            torch.optim.Adam(model.parameters(), lr=lr))


def _paddle_parts(model: Any, train: corpus.Split, test: corpus.Split, batch_size: int, lr: float):
    import paddle
    from paddle.io import DataLoader, Dataset

    class Data(Rows, Dataset):
        def __init__(self, split: corpus.Split) -> None:
            super().__init__()
            self.split = split

    return (DataLoader(Data(train), batch_size=batch_size, shuffle=True),
            DataLoader(Data(test), batch_size=EVALUATE_BATCH_SIZE),
            paddle.optimizer.Adam(learning_rate=lr, parameters=model.parameters()))


def _oneflow_parts(model: Any, train: corpus.Split, test: corpus.Split, batch_size: int, lr: float):
    import oneflow as flow
    from oneflow.utils.data import DataLoader, Dataset

    class Data(Rows, Dataset):
        def __init__(self, split: corpus.Split) -> None:
            self.split = split

    return (DataLoader(Data(train), batch_size=batch_size, shuffle=True),
            DataLoader(Data(test), batch_size=EVALUATE_BATCH_SIZE),
            flow.optim.Adam(model.parameters(), lr=lr))


def _jittor_parts(model: Any, train: corpus.Split, test: corpus.Split, batch_size: int, lr: float):
    import jittor as jt
    from jittor.dataset import Dataset

    class Data(Rows, Dataset):  # a jittor Dataset is its own loader; len() counts its batches
        __len__ = Dataset.__len__

        def __init__(self, split: corpus.Split, batch_size: int, shuffle: bool) -> None:
            super().__init__()
            self.split = split
            self.set_attrs(total_len=len(split.labels), batch_size=batch_size, shuffle=shuffle)

    return (Data(train, batch_size, True), Data(test, EVALUATE_BATCH_SIZE, False),
            jt.optim.Adam(model.parameters(), lr=lr))


FRAMEWORK_PARTS: dict[str, Callable[..., tuple[Any, Any, Any]]] = {
    "torch": _torch_parts, "paddle": _paddle_parts, "jittor": _jittor_parts, "oneflow": _oneflow_parts}


# ---------------------------------------------------------------- the shared part

def accuracy(results: dict) -> float:
    """The test accuracy in an evaluation's results (keyed ``acc#acc#test``: indicator, metric, dataloader)."""
    return float(results["acc#acc#test"])


class Record(Callback):
    """Every batch's training loss and the test accuracy after each evaluation."""

    def __init__(self) -> None:
        self.losses: list[tuple[int, int, float]] = []
        self.accuracy: list[tuple[int, float]] = []

    def on_before_backward(self, trainer: Any, outputs: Any) -> None:
        self.losses.append((trainer.state.global_forward_batches, trainer.state.cur_epoch_idx, float(outputs["loss"].item())))

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        self.accuracy.append((trainer.state.cur_epoch_idx, accuracy(results)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--driver", choices=models.FRAMEWORKS, default="torch")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0, help="initial weights and batch order")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--n-batches", type=int, default=-1,
                        help="stop after this many training batches (-1: train --epochs epochs)")
    parser.add_argument("--out", default=None, help="folder for loss.csv and metrics.json "
                        "(default: text_classification_runs/DRIVER)")
    return parser.parse_args(argv)


def versions(driver: str) -> dict[str, str]:
    framework = {"oneflow": "oneflow", "paddle": "paddle", "jittor": "jittor", "torch": "torch"}[driver]
    import fastcore_train
    return {"python": platform.python_version(), driver: importlib.import_module(framework).__version__,
            "fastcore_train": fastcore_train.__version__}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    out = Path(args.out or f"text_classification_runs/{args.driver}")
    config = ClassifierConfig()
    train, test = corpus.load("train"), corpus.load("test")
    model = models.load(args.driver).build_classifier(config, args.seed)
    train_loader, test_loader, optimizer = FRAMEWORK_PARTS[args.driver](model, train, test, args.batch_size, args.lr)
    record = Record()
    trainer = Trainer(model=model, driver=args.driver, device=args.device, optimizers=optimizer,
                      train_dataloader=train_loader, evaluate_dataloaders={"test": test_loader},
                      metrics={"acc": Accuracy()}, evaluate_input_mapping={"label": "target"},
                      n_epochs=args.epochs, n_batches=args.n_batches, evaluate_every=-1,
                      sampler_seed=args.seed, callbacks=[record], progress_bar=None, model_summary=False)
    started = time.perf_counter()
    trainer.run(num_eval_batch_per_dl=-1)
    seconds = time.perf_counter() - started
    if not record.accuracy or record.accuracy[-1][0] != trainer.state.cur_epoch_idx:  # stopped mid-epoch
        record.accuracy.append((trainer.state.cur_epoch_idx, accuracy(trainer.run_evaluate())))

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "loss.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["batch", "epoch", "loss"])
        writer.writerows(record.losses)
    metrics = {"driver": args.driver, "test_accuracy": record.accuracy[-1][1],
               "accuracy_per_epoch": [acc for _, acc in record.accuracy], "batches": len(record.losses),
               "seconds": round(seconds, 1), "date": time.strftime("%Y-%m-%d"), "versions": versions(args.driver),
               "recipe": {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed,
                          "n_batches": args.n_batches, "optimizer": "Adam", "config": vars(config)}}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    print(f"{args.driver}: test accuracy {metrics['test_accuracy']:.4f} after {len(record.losses)} batches "
          f"({seconds:.0f} s); wrote {out / 'loss.csv'} and {out / 'metrics.json'}")
    return metrics


if __name__ == "__main__":
    main()
