"""The demo: train a small MLP on the shipped digits data with any backend, then report accuracy.

The demo itself is framework-neutral; each backend's ``build_demo`` supplies the model, the
dataloaders and the optimizer in its own framework, from the shared parts in
:mod:`fastcore_train.data.digits_task`.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any, Optional

from fastcore_train.data import load_digits
from fastcore_train.drivers.registry import (BackendNotInstalledError, available_driver_names, backend_for_driver_name,
                                             load_backend)
from fastcore_train.parallel.placement import DeviceUnavailableError


def parse_device(text: str) -> Any:
    """``"cpu"``, ``"cuda:0"``, ``"0"`` (an int) or a comma list ``"cpu,cpu"`` / ``"0,1"``."""
    parts = [part.strip() for part in text.split(",")]
    values: list[Any] = [int(part) if part.lstrip("-").isdigit() else part for part in parts]
    return values[0] if len(values) == 1 else values


def run_demo(driver: str = "torch", device: Any = "cpu", n_epochs: int = 20, batch_size: int = 32,
             hidden: int = 128, lr: float = 3e-3, seed: int = 0, output: Optional[Path] = None,
             progress_bar: Optional[str] = "auto") -> dict[str, Any]:
    """Train, evaluate each epoch, checkpoint at the end; return the final evaluation results.

    With ``output``, the folder also gets the loss/accuracy curves (``curves.png``, when
    matplotlib is installed) and the logged values as CSV files.
    """
    from fastcore_train.callbacks.csv_logger import CSVLoggerCallback
    from fastcore_train.callbacks.curves import CurvePlotCallback
    from fastcore_train.controllers.trainer import Trainer
    from fastcore_train.metrics import Accuracy

    backend = load_backend(backend_for_driver_name(driver))
    task = backend.build_demo(load_digits(), hidden=hidden, lr=lr, batch_size=batch_size, seed=seed)
    callbacks: list[Any] = []
    curves: Optional[Any] = None
    if output is not None:
        callbacks.append(CSVLoggerCallback(output, log_every_n_batches=15, run_subfolder=False))
        if importlib.util.find_spec("matplotlib") is not None:
            curves = CurvePlotCallback(output, log_every_n_batches=15, run_subfolder=False)
            callbacks.append(curves)
    trainer = Trainer(
        model=task.model, train_dataloader=task.train_dataloader, optimizers=task.optimizer,
        driver=driver, device=device, n_epochs=n_epochs,
        evaluate_dataloaders={"test": task.evaluate_dataloader}, metrics={"acc": Accuracy()},
        evaluate_every=-1, monitor="acc", progress_bar=progress_bar, callbacks=callbacks,
    )
    started = time.perf_counter()
    trainer.run(num_eval_sanity_batch=1)
    elapsed = time.perf_counter() - started
    results = trainer.run_evaluate() if not trainer.evaluate_results else trainer.evaluate_results
    if output is not None:
        trainer.save_checkpoint(Path(output) / "checkpoint")
    if trainer.driver.comm.is_global_zero():
        print(f"Trained {trainer.global_forward_batches} batches in {elapsed:.1f} s with driver={driver!r}.")
        if output is not None:
            print(f"Checkpoint written to {Path(output) / 'checkpoint'}")
            print(f"Logged values: {Path(output) / 'train_metrics.csv'}, {Path(output) / 'evaluate_metrics.csv'}")
            if curves is not None and curves.path is not None:
                print(f"Loss and accuracy curves: {curves.path}")
                print(trend_line(curves))
            elif curves is None:
                print("Install matplotlib (pip install 'fastcore-train[plot]') to also get curves.png.")
        print("Final evaluation: " + ", ".join(f"{key}={value:.4f}" for key, value in results.items()))
    return results


def trend_line(curves: Any) -> str:
    """The curves in one line of text: first and last value of each series."""
    parts = []
    for (kind, name), (_, values) in sorted(curves.history.items()):
        if values:
            parts.append(f"{kind} {name}: {values[0]:.4g} -> {values[-1]:.4g}")
    return "Curves: " + "; ".join(parts)


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's command-line options, added to ``parser``."""
    parser.add_argument("--driver", default="torch", metavar="NAME",
                        help=f"backend driver to train with: {', '.join(available_driver_names())} (default: torch)")
    parser.add_argument("--device", default="cpu", type=parse_device,
                        help="'cpu', 'cuda:0', a GPU index, or a comma list for several (default: cpu)")
    parser.add_argument("--epochs", type=int, default=20, help="training epochs (default: 20)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size (default: 32)")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default: 3e-3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--output", type=Path, default=Path("demo_output"),
                        help="folder for the final checkpoint, curves.png and CSV logs (default: ./demo_output)")
    parser.add_argument("--progress-bar", default="auto", choices=["auto", "rich", "tqdm", "raw", "none"],
                        help="progress display (default: auto = rich in a terminal, plain lines otherwise)")


def main_demo(args: argparse.Namespace, prog: str = "fastcore-train demo") -> int:
    """Run the demo with parsed command-line options; the exit status.

    What the user's setup decides (an unknown driver name, a framework that is not installed, a
    device this machine lacks) is one line on stderr naming the fix, and exit status 2, as for a
    bad option; anything else keeps its traceback.
    """
    if backend_for_driver_name(args.driver, strict=False) is None:
        return _setup_error(prog, f"unknown driver {args.driver!r}; pass one of {', '.join(available_driver_names())}.")
    progress = None if args.progress_bar == "none" else args.progress_bar
    try:
        run_demo(driver=args.driver, device=args.device, n_epochs=args.epochs, batch_size=args.batch_size,
                 lr=args.lr, seed=args.seed, output=args.output, progress_bar=progress)
    except (BackendNotInstalledError, DeviceUnavailableError) as error:
        return _setup_error(prog, str(error))
    return 0


def _setup_error(prog: str, message: str) -> int:
    sys.stdout.flush()
    sys.stderr.write(f"{prog}: error: {message}\n")
    return 2
