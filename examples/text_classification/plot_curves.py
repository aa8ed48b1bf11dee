"""Draw several runs' per-batch training losses overlaid in one picture (needs matplotlib: the plot extra).

    cd examples/text_classification
    python plot_curves.py runs/torch runs/paddle runs/jittor runs/oneflow --output ../../docs/images/text-classification-loss.png

Each run folder holds the ``loss.csv`` and ``metrics.json`` that ``train.py --out`` writes. The
legend names each run's framework and test accuracy; the title gives the largest difference
between any run's loss and the first run's at the same batch, which the lower panel draws per batch.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

# One colour and line style per framework, so overlaid curves stay distinguishable where they coincide.
STYLES = {"torch": ("#d62728", "-", 3.0), "paddle": ("#1f77b4", "--", 2.2),
          "jittor": ("#2ca02c", "-.", 1.6), "oneflow": ("#9467bd", ":", 1.4)}


def read_losses(run: Path) -> np.ndarray:
    """The run's training losses in batch order."""
    with open(run / "loss.csv", encoding="utf-8") as file:
        return np.array([float(row["loss"]) for row in csv.DictReader(file)])


def max_difference(curves: list[np.ndarray]) -> float:
    """The largest ``|loss - first run's loss|`` over the batches all runs have."""
    length = min(len(curve) for curve in curves)
    return max(float(np.abs(curve[:length] - curves[0][:length]).max()) for curve in curves)


def plot(runs: list[Path], output: Path, smooth: int = 10) -> float:
    """Write the picture to ``output``; return the largest loss difference between runs."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = [read_losses(run) for run in runs]
    difference = max_difference(curves)
    figure, (axis, below) = plt.subplots(2, 1, figsize=(8, 6.5), dpi=110, sharex=True,
                                         gridspec_kw={"height_ratios": [2.2, 1]})
    reference_name = None
    for run, curve in zip(runs, curves):
        metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
        driver = metrics["driver"]
        reference_name = reference_name or driver
        colour, style, width = STYLES.get(driver, (None, "-", 1.5))
        axis.plot(np.arange(len(curve)), curve, color=colour, alpha=0.15, linewidth=0.8)
        window = max(1, min(smooth, len(curve)))
        smoothed = np.convolve(curve, np.ones(window) / window, mode="valid")
        axis.plot(np.arange(window - 1, len(curve)), smoothed, color=colour, linestyle=style, linewidth=width,
                  label=f"{driver} {metrics['versions'][driver]}: test accuracy {metrics['test_accuracy']:.1%}")
        if curve is not curves[0]:
            length = min(len(curve), len(curves[0]))
            gap = np.abs(curve[:length] - curves[0][:length])
            below.plot(np.arange(length), np.maximum(gap, 1e-9), color=colour, linewidth=0.9, label=driver)
    epochs = metrics["recipe"]["epochs"]
    per_epoch = len(curves[0]) // max(epochs, 1)
    for panel in (axis, below):
        for epoch in range(1, epochs):
            panel.axvline(epoch * per_epoch, color="grey", linewidth=0.6, linestyle=(0, (2, 4)))
        panel.set_yscale("log")
        panel.grid(alpha=0.3, which="both", linewidth=0.4)
    axis.set_ylabel(f"training loss\n({smooth}-batch mean bold, raw faint)")
    axis.set_title(f"Text classifier, one recipe on {len(runs)} frameworks "
                   f"(max |loss difference| {difference:.1e})", fontsize=10)
    axis.legend(fontsize=9)
    below.set_ylabel(f"|loss - {reference_name} loss|")
    below.set_xlabel("training batch (grey lines: epoch ends)")
    if len(curves) > 1:
        below.legend(fontsize=8, ncol=3)
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output)
    plt.close(figure)
    return difference


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders written by train.py --out")
    parser.add_argument("--output", type=Path, default=Path("text-classification-loss.png"))
    parser.add_argument("--smooth", type=int, default=10, help="batches in the moving mean drawn bold")
    args = parser.parse_args(argv)
    missing = [str(run) for run in args.runs if not (run / "loss.csv").is_file()]
    if missing:
        sys.exit(f"no loss.csv in {', '.join(missing)}: pass folders written by train.py --out.")
    difference = plot(args.runs, args.output, args.smooth)
    print(f"wrote {args.output}; max |loss difference| between runs {difference:.2e}")


if __name__ == "__main__":
    main()
