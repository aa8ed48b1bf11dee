"""What ``fit`` checks after parsing and before building anything: a bad value is one line naming
its key and where it was set, not a traceback after the model and data were built (or, for the
outputs, after every epoch was trained).

The value checks are the Trainer's own (:mod:`fastcore_train.controllers.arguments`,
``check_collective_timeout``, ``report_names``, ``check_output_choice``), run on the parsed
``trainer:`` values, so the command line accepts exactly what the Trainer accepts. What only a
driver can judge (``device``) is checked when the Trainer is built: :func:`trainer_value_error`
maps its ``ValueError`` to the key the same way.
"""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from fastcore_train.cli.errors import ConfigError, locate, on_command_line
from fastcore_train.cli.resolved_config import CONFIG_NAME, config_target_problem
from fastcore_train.cli.sections import config_files
from fastcore_train.config.trainer_args import TrainerArgs

TRAINER_FIELDS = frozenset(item.name for item in dataclasses.fields(TrainerArgs))


def where_set(key: str, argv: Sequence[str]) -> Optional[str]:
    """``"command line"`` when ``argv`` sets ``key``, else the file line that does (None: a default)."""
    return "command line" if on_command_line(key, argv) else locate(key, config_files(argv))


def trainer_value_error(error: BaseException, argv: Sequence[str]) -> Optional[ConfigError]:
    """A :class:`ConfigError` for a Trainer ``ValueError`` whose message starts with the name of a
    ``trainer:`` field (``"n_epochs must be ..."``, ``"device='gpu0' is not ..."``); None otherwise."""
    message = re.sub(r"\s*\n\s*", " ", str(error).strip())
    match = re.match(r"(\w+)\b", message)
    if match is None or match.group(1) not in TRAINER_FIELDS:
        return None
    key = f"trainer.{match.group(1)}"
    return ConfigError(message, key, where_set(key, argv))


def _checked(check: Callable[[], Any], argv: Sequence[str]) -> None:
    try:
        check()
    except ValueError as error:
        mapped = trainer_value_error(error, argv)
        if mapped is None:
            raise
        raise mapped from error


def check_trainer_values(trainer: Any, argv: Sequence[str]) -> None:
    """Run the Trainer's own checks on the parsed ``trainer:`` values (a namespace of TrainerArgs fields)."""
    from fastcore_train.controllers.report_to import report_names
    from fastcore_train.controllers.arguments import check_run_arguments, check_trainer_arguments
    from fastcore_train.drivers.collectives import check_collective_timeout
    from fastcore_train.parallel.launch import check_output_choice

    _checked(lambda: check_trainer_arguments(
        train_dataloader=(), n_epochs=trainer.n_epochs, evaluate_dataloaders=None, metrics=None,
        evaluate_batch_step_fn=None, batch_step_fn=None, evaluate_every=trainer.evaluate_every,
        accumulation_steps=trainer.accumulation_steps, n_batches=trainer.n_batches,
        overfit_batches=trainer.overfit_batches, monitor=trainer.monitor), argv)
    _checked(lambda: check_run_arguments(trainer.num_train_batch_per_epoch, trainer.num_eval_batch_per_dl,
                                         trainer.num_eval_sanity_batch), argv)
    _checked(lambda: check_collective_timeout(trainer.collective_timeout), argv)
    _checked(lambda: report_names(trainer.report_to), argv)
    _checked(lambda: check_output_choice(trainer.output_from_new_proc), argv)


def check_resume_from(resume_from: Optional[str], argv: Sequence[str]) -> None:
    """``trainer.resume_from`` must be a checkpoint folder (or one a crashed save moved aside), or
    ``auto`` / ``auto:<folder>`` (the newest checkpoint found when the run starts)."""
    from fastcore_train.checkpoint.resume import is_auto
    if resume_from is None or is_auto(resume_from):
        return
    from fastcore_train.checkpoint.checksums import META_FILE
    folder = Path(resume_from)
    key = "trainer.resume_from"
    if not folder.exists():
        moved_aside = folder.parent.is_dir() and any(folder.parent.glob(f"{folder.name}.old-*"))
        if not moved_aside:
            raise ConfigError(f"no checkpoint folder at {resume_from!r}: pass the folder fit saved "
                              "(<output_dir>/checkpoint) or one written by save_checkpoint or CheckpointCallback.",
                              key, where_set(key, argv))
    elif not (folder / META_FILE).is_file():
        raise ConfigError(f"{resume_from!r} is not a fastcore_train checkpoint (it has no {META_FILE}): pass the "
                          "folder fit saved (<output_dir>/checkpoint) or one written by save_checkpoint.",
                          key, where_set(key, argv))


def check_outputs(output_dir: str, save_checkpoint: bool, argv: Sequence[str]) -> None:
    """The resolved config and the final checkpoint may be written under ``output_dir``."""
    from fastcore_train.checkpoint import checkpoint_target_problem
    output = Path(output_dir)
    key = "output_dir"
    problem = config_target_problem(output / CONFIG_NAME, config_files(argv))
    if problem is None and save_checkpoint:
        found = checkpoint_target_problem(output / "checkpoint")
        if found is not None:
            problem = (f"fit saves the trained model to {str(output / 'checkpoint')!r} when training ends, and "
                       f"cannot: {found} Or pass --save_checkpoint false. Nothing was trained.")
    if problem is None and os.path.exists(output) and not output.is_dir():
        problem = f"{output_dir!r} is a file, not a folder; pass a folder for the config and the checkpoint."
    if problem is not None:
        raise ConfigError(problem, key, where_set(key, argv))


def check_before_building(config: Any, argv: Sequence[str]) -> None:
    """Every check that needs no framework, in the order of the config: trainer values, resume_from,
    the output folder."""
    check_trainer_values(config.trainer, argv)
    check_resume_from(config.trainer.resume_from, argv)
    check_outputs(config.output_dir, config.save_checkpoint, argv)
