"""Trainer arguments as data: :class:`TrainerArgs` (the single source for the command line, the
docs table and ``Trainer(**args.trainer_kwargs())``) and FlagAI's names for them."""
from fastcore_train.config.flagai import from_flagai
from fastcore_train.config.trainer_args import TrainerArgs, trainer_args_table

__all__ = ["TrainerArgs", "from_flagai", "trainer_args_table"]
