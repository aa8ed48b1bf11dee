"""``fastcore-train convert SRC DST --to paddle``: a checkpoint written on one framework, made
loadable by another (:func:`fastcore_train.convert_checkpoint`)."""
from __future__ import annotations

import argparse
import sys


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", help="a checkpoint folder written by save_checkpoint (any backend)")
    parser.add_argument("dst", help="the folder to write the converted checkpoint to (new, empty, or a checkpoint); "
                                    "with --to neutral, a new .safetensors file")
    parser.add_argument("--to", required=True, metavar="FRAMEWORK",
                        help="torch, paddle, jittor, oneflow, or neutral (the weights as a safetensors file)")
    parser.add_argument("--weights-only", action="store_true",
                        help="convert the model alone (for load_model), not the optimizer and trainer state")


def main_convert(args: argparse.Namespace) -> int:
    """Convert; a bad input is one line on stderr and exit status 2, nothing written."""
    from fastcore_train.checkpoint import CheckpointError
    from fastcore_train.convert import UnconvertibleOptimizerError, UnmappableLayerError, convert_checkpoint
    try:
        written = convert_checkpoint(args.src, args.dst, to=args.to, weights_only=args.weights_only)
    except (CheckpointError, UnmappableLayerError, UnconvertibleOptimizerError, ValueError, FileNotFoundError,
            ImportError) as error:
        print(f"fastcore-train convert: {error}", file=sys.stderr)
        return 2
    print(f"Converted {args.src} to {args.to}: {written}")
    return 0
