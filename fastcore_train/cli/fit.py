"""``fastcore-train fit``: build model, data, optimizer and Trainer from a config file, and train.

The parser is jsonargparse (what LightningCLI uses): it reads YAML/JSON config files and
``--key.sub value`` overrides, checks every value against the type hints of the class or function
it goes to, and prints the resolved config (``--print_config``). The resolved config is written to
``<output_dir>/config.yaml`` beside the final checkpoint (``<output_dir>/checkpoint``); to go on
from there: ``fastcore-train fit --config <output_dir>/config.yaml --trainer.resume_from
<output_dir>/checkpoint --trainer.n_epochs <more>``. Neither replaces a file ``fit`` did not write,
and every value the Trainer would refuse is refused before anything is built
(:mod:`fastcore_train.cli.preflight`).
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from fastcore_train.cli.errors import ConfigError, from_parser_error
from fastcore_train.cli.preflight import check_before_building, trainer_value_error
from fastcore_train.cli.resolved_config import CONFIG_NAME, write_config
from fastcore_train.cli.sections import Section, add_section_arguments, config_files, read_sections
from fastcore_train.config.trainer_args import TrainerArgs

#: The modules of the ``cli`` extra that ``fit`` imports (jsonargparse's ``signatures`` extras are optional to it).
CLI_MODULES = ("jsonargparse", "yaml")
INSTALL_HINT = 'fit needs the cli extra: pip install "fastcore-train[cli]"'


def missing_cli_module() -> Optional[str]:
    """The first module of the ``cli`` extra that cannot be imported, or None."""
    for name in CLI_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as error:
            return getattr(error, "name", None) or name
    return None


def build_parser(sections: dict[str, Section], prog: str = "fastcore-train fit") -> Any:
    """The jsonargparse parser of ``fit`` for these sections (``prog``: the command's name)."""
    try:
        from jsonargparse import ArgumentParser
    except ImportError as error:
        raise ConfigError(f"{INSTALL_HINT} ({error.name or 'jsonargparse'} is not installed)") from error
    from fastcore_train.events.callback import Callback
    from fastcore_train.metrics.metric import Metric

    parser = ArgumentParser(prog=prog, exit_on_error=False, allow_abbrev=False,
                            description="Train from a config file: model, data, optimizer (and lr_scheduler) "
                                        "named by import path with their init_args, the Trainer's arguments "
                                        "under trainer:. Command-line --key.sub value overrides the file.")
    parser.add_argument("--config", action="config", help="a YAML or JSON config file (several: later ones win)")
    parser.add_argument("--seed_everything", type=Optional[int], default=0,
                        help="seed python, numpy and the framework before anything is built (null: do not)")
    parser.add_argument("--output_dir", type=str, default="fastcore_runs/fit",
                        help="folder for the resolved config.yaml and the final checkpoint")
    parser.add_argument("--save_checkpoint", type=bool, default=True,
                        help="save <output_dir>/checkpoint when training ends")
    parser.add_class_arguments(TrainerArgs, "trainer", instantiate=True)
    for section in sections.values():
        add_section_arguments(parser, section)
    parser.add_argument("--metrics", type=Optional[dict[str, Union[Metric, Callable]]], default=None,
                        help="metrics by name, each {class_path, init_args} of a fastcore_train Metric, or the "
                             "import path of a function fn(preds, labels) -> dict")
    parser.add_argument("--callbacks", type=Optional[list[Callback]], default=None,
                        help="callbacks, each {class_path, init_args}")
    return parser


def parse(argv: Sequence[str], prog: str = "fastcore-train fit") -> tuple[Any, Any, dict[str, Section]]:
    """``(parser, config namespace, sections)``; a bad config is a :class:`ConfigError`."""
    import argparse
    sections = read_sections(argv)
    parser = build_parser(sections, prog)
    try:
        config = parser.parse_args(list(argv))
    except (argparse.ArgumentError, TypeError, ValueError) as error:
        known = [action.dest for action in parser._actions if action.dest not in ("help", "config")]
        raise from_parser_error(error, config_files(argv), argv, known) from error
    return parser, config, sections


def _dataloaders(data: Any) -> tuple[Any, Any]:
    """``(train, evaluate)`` from what the data section built: a dict, a pair, or an object with
    ``train_dataloader`` (and ``evaluate_dataloaders``) attributes or methods."""
    if isinstance(data, dict):
        if "train_dataloader" not in data:
            raise ConfigError(f"the data section returned a dict without 'train_dataloader' (keys: {sorted(data)}).",
                              "data")
        return data["train_dataloader"], data.get("evaluate_dataloaders")
    if isinstance(data, (tuple, list)) and 1 <= len(data) <= 2:
        return data[0], data[1] if len(data) == 2 else None
    if hasattr(data, "train_dataloader"):
        def value(name: str) -> Any:
            found = getattr(data, name, None)
            return found() if callable(found) else found
        return value("train_dataloader"), value("evaluate_dataloaders")
    raise ConfigError("the data section must build a dict {'train_dataloader': ..., 'evaluate_dataloaders': ...}, "
                      f"a (train, evaluate) pair, or an object with a train_dataloader; got {type(data).__name__}.",
                      "data")


def init_args(config: Any, key: str) -> dict[str, Any]:
    """The ``init_args`` of section ``key`` as a dict (none for a target without parameters)."""
    found = getattr(config, key).get("init_args")
    return {} if found is None else found.as_dict()


def build_and_run(parser: Any, config: Any, sections: dict[str, Section], argv: Sequence[str] = ()) -> Any:
    """Check, seed, build model, data, optimizer (and scheduler), save the resolved config, train; the
    Trainer. ``argv`` (the command line parsed) lets errors say where a key was set."""
    from fastcore_train.callbacks.lr_scheduler import LRSchedCallback
    from fastcore_train.controllers.trainer import Trainer
    from fastcore_train.seeding import seed_everything

    check_before_building(config, argv)
    if config.seed_everything is not None:
        seed_everything(config.seed_everything)
    model = sections["model"].build(init_args(config, "model"))
    train, evaluate = _dataloaders(sections["data"].build(init_args(config, "data")))
    optimizer = sections["optimizer"].build(init_args(config, "optimizer"),
                                            model if sections["optimizer"].injected == "model" else model.parameters())
    callbacks: list[Any] = []
    if "lr_scheduler" in sections:
        callbacks.append(LRSchedCallback(sections["lr_scheduler"].build(init_args(config, "lr_scheduler"),
                                                                        optimizer)))
    objects = parser.instantiate(config)
    args: TrainerArgs = objects.trainer
    callbacks += list(objects.callbacks or [])
    metrics = objects.metrics or None
    try:
        trainer = Trainer(model, train, optimizer, evaluate_dataloaders=evaluate if metrics else None,
                          metrics=metrics, callbacks=callbacks, **args.trainer_kwargs())
    except ValueError as error:  # a value only the driver judges (device): name its key, as for the others
        mapped = trainer_value_error(error, argv)
        if mapped is None:
            raise
        raise mapped from error
    output = Path(config.output_dir)
    if trainer.driver.comm.is_global_zero():
        output.mkdir(parents=True, exist_ok=True)
        write_config(output / CONFIG_NAME, parser.dump(config, skip_validation=True))
    trainer.run(**args.run_kwargs())
    if config.save_checkpoint:
        trainer.save_checkpoint(output / "checkpoint")
    return trainer


def main_fit(argv: Sequence[str], prog: str = "fastcore-train fit") -> int:
    """Run ``fit`` with its command-line arguments; the exit status (2: a bad config). ``prog``
    is the command's name in usage lines and errors."""
    try:
        missing = missing_cli_module()
        if missing is not None:
            raise ConfigError(f"{INSTALL_HINT} ({missing} is not installed)")
        parser, config, sections = parse(argv, prog)
        build_and_run(parser, config, sections, argv)
    except ConfigError as error:
        sys.stderr.write(f"{prog}: error: {error}\n")
        return 2
    return 0
