"""Command line: ``fastcore-train demo [--driver NAME] ...``, ``fastcore-train fit --config run.yaml``
and ``fastcore-train convert SRC DST --to paddle``.

``python -m fastcore_train`` is the same program; usage lines and errors name the command the way
it was run. Both import modules from the current folder (``class_path: mymodule.Net``): ``python -m``
puts it first on ``sys.path``, and :func:`main` does the same for the console script.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence


#: How the console script is called (``[project.scripts]`` in pyproject.toml).
CONSOLE_NAME = "fastcore-train"
#: How the same program is called through the interpreter.
MODULE_NAME = "python -m fastcore_train"


def put_current_folder_on_path() -> None:
    """Let ``class_path`` name modules of the current folder, as ``python -m`` does: put it first on
    ``sys.path`` unless it is there already or Python was told not to (``-P``, ``PYTHONSAFEPATH``)."""
    if getattr(sys.flags, "safe_path", False):
        return
    here = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == here for entry in sys.path):
        sys.path.insert(0, here)


def main(argv: Optional[Sequence[str]] = None, prog: str = CONSOLE_NAME) -> int:
    """Run the command line ``argv`` (default: this process's, and then the current folder is put on
    ``sys.path`` as ``python -m`` does); the exit status. ``prog`` is the command's name in usage
    lines and errors."""
    if argv is None:
        put_current_folder_on_path()
    from fastcore_train.cli.convert import add_convert_arguments, main_convert
    from fastcore_train.demo import add_demo_arguments, main_demo

    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["fit"]:  # jsonargparse parses fit's arguments (fastcore_train.cli.fit)
        from fastcore_train.cli.fit import main_fit
        return main_fit(arguments[1:], prog=f"{prog} fit")

    parser = argparse.ArgumentParser(prog=prog,
                                     description="fastcore_train: one Trainer for torch, paddle, jittor and oneflow.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="train a small MLP on the shipped handwritten-digits data",
                               description="Train a small MLP on the shipped handwritten-digits data "
                                           "(1437 train / 360 test images), evaluate each epoch, save a "
                                           "checkpoint and print the final accuracy.")
    add_demo_arguments(demo)
    commands.add_parser("fit", add_help=False, help="train from a config file: fit --config run.yaml [--key value ...] "
                                                    "(fit --help lists every key)")
    convert = commands.add_parser("convert", help="convert a checkpoint to another framework: convert SRC DST --to paddle",
                                  description="Convert a checkpoint folder written on one framework into one that "
                                              "another framework's Trainer resumes (or load_model loads).")
    add_convert_arguments(convert)
    args = parser.parse_args(arguments)
    if args.command == "convert":
        return main_convert(args)
    return main_demo(args, prog=f"{prog} demo")


if __name__ == "__main__":
    sys.exit(main(prog=MODULE_NAME))
