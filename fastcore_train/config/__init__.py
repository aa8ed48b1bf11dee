"""Trainer arguments as data: :class:`TrainerArgs` (the single source for the command line, the
docs table and ``Trainer(**args.trainer_kwargs())``), and FlagAI's and transformers' names for them."""
from fastcore_train.config.flagai import from_flagai
from fastcore_train.config.flagai_env_args import EnvArgs
from fastcore_train.config.trainer_args import TrainerArgs, trainer_args_table
from fastcore_train.config.transformers_args import from_transformers

__all__ = ["EnvArgs", "TrainerArgs", "from_flagai", "from_transformers", "trainer_args_table"]
