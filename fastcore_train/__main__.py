"""Command line: ``python -m fastcore_train demo [--driver NAME] [--device D] [--epochs N]``."""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fastcore_train.demo import add_demo_arguments, main_demo

    parser = argparse.ArgumentParser(prog="python -m fastcore_train",
                                     description="fastcore_train: one Trainer for torch, paddle, jittor and oneflow.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="train a small MLP on the shipped handwritten-digits data",
                               description="Train a small MLP on the shipped handwritten-digits data "
                                           "(1437 train / 360 test images), evaluate each epoch, save a "
                                           "checkpoint and print the final accuracy.")
    add_demo_arguments(demo)
    args = parser.parse_args(argv)
    return main_demo(args)


if __name__ == "__main__":
    sys.exit(main())
