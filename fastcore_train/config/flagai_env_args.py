"""FlagAI's ``EnvArgs`` command line: ``python train.py --epochs=10 --batch_size=8``.

A FlagAI script keeps its argument handling::

    env_args = EnvArgs(env_type="pytorch", epochs=2, batch_size=8, lr=1e-3)
    env_args.add_arg(arg_name="test1", default=0, type=int)
    args = env_args.parse_args()          # --name=value (or --name value) flags, FlagAI's defaults
    trainer_args = args.trainer_args()    # the Trainer's part, through from_flagai
    saving = CheckpointCallback(**args.checkpoint_kwargs())  # save_dir, save_interval

Flags, defaults and parsing follow FlagAI's ``EnvArgs``: booleans are written ``True`` / ``False``,
a value written ``[a,b]`` becomes the list ``["a", "b"]``, ``env_type=pytorch`` sets
``not_call_launch``; ``--local_rank`` is also read as ``--local-rank`` (torch 2's launcher). Every value stays on the namespace (``args.batch_size``, ``args.lr``, your
``add_arg`` names) for the dataloader and optimizer you build.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Optional, Sequence

__all__ = ["EnvArgs", "FlagAINamespace", "str2bool"]


def str2bool(value: Any) -> bool:
    """FlagAI's boolean flag values: ``True`` / ``False`` (also ``true``, ``1``, ``yes``, ...)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "y"):
        return True
    if text in ("false", "0", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {value!r}")


#: FlagAI's EnvArgs flags this package reads or names a place for: (default, type).
FLAGS: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    "env_type": ("pytorch", str), "experiment_name": ("test_experiment", str), "model_name": ("test_model", str),
    "epochs": (1, int), "batch_size": (1, int), "lr": (1e-5, float), "seed": (1234, int), "fp16": (False, str2bool),
    "pytorch_device": ("cpu", str), "clip_grad": (1.0, float), "checkpoint_activations": (False, str2bool),
    "gradient_accumulation_steps": (1, int), "weight_decay": (1e-5, float), "warm_up": (0.1, float),
    "log_interval": (100, int), "eval_interval": (1000, int), "save_interval": (1000, int), "save_dir": (None, str),
    "load_dir": (None, str), "save_optim": (False, str2bool), "save_rng": (False, str2bool),
    "load_type": ("latest", str), "load_optim": (False, str2bool), "load_rng": (False, str2bool),
    "tensorboard": (False, str2bool), "tensorboard_dir": ("tensorboard_summary", str),
    "num_checkpoints": (1, int), "master_ip": ("localhost", str), "master_port": (17750, int),
    "num_nodes": (1, int), "num_gpus": (1, int), "hostfile": ("./hostfile", str),
    "deepspeed_config": ("./deepspeed.json", str), "model_parallel_size": (1, int),
    "training_script": ("train.py", str), "local_rank": (0, int),
}
#: Other spellings of a flag: torch 2's ``torch.distributed.launch`` passes ``--local-rank`` (FlagAI reads
#: only ``--local_rank``, so its documented launch line stops there: "unrecognized arguments").
ALSO_SPELLED = {"local_rank": ("--local-rank",)}
#: The flags that set up the Trainer (passed to :func:`fastcore_train.config.from_flagai`).
TRAINER_FLAGS = ("env_type", "pytorch_device", "num_gpus", "deepspeed_config", "epochs", "gradient_accumulation_steps",
                 "fp16", "eval_interval", "seed", "log_interval", "tensorboard", "tensorboard_dir",
                 "experiment_name", "load_dir", "checkpoint_activations")


class FlagAINamespace(argparse.Namespace):
    """The parsed values (FlagAI's names), and the fastcore_train objects they set up."""

    def trainer_args(self) -> Any:
        """The :class:`TrainerArgs` of these values (FlagAI's Trainer names, through ``from_flagai``)."""
        from fastcore_train.config.flagai import from_flagai
        return from_flagai(**{name: getattr(self, name) for name in TRAINER_FLAGS})

    def checkpoint_kwargs(self) -> dict[str, Any]:
        """FlagAI's ``save_dir`` / ``save_interval`` as ``CheckpointCallback(**...)`` arguments: a
        resumable checkpoint every ``save_interval`` batches, all of them kept, as FlagAI keeps them
        (FlagAI saves nothing without ``save_dir``: check it before adding the callback)."""
        return {"folder": self.save_dir, "every_n_batches": self.save_interval, "save_object": "checkpoint"}


class EnvArgs:
    """FlagAI's ``EnvArgs``: keyword arguments give the flags' defaults (FlagAI's where left out);
    :meth:`add_arg` adds a flag of your own; :meth:`parse_args` reads the command line."""

    def __init__(self, **defaults: Any) -> None:
        self.parser = argparse.ArgumentParser(description="FlagAI-style arguments (fastcore_train)",
                                              allow_abbrev=False)
        for name, (default, kind) in FLAGS.items():
            spellings = [f"--{name}", *ALSO_SPELLED.get(name, ())]
            self.parser.add_argument(*spellings, default=defaults.pop(name, default), type=kind)
        self.parser.add_argument("--not_call_launch", action="store_true",
                                 help="FlagAI's launcher flag; ranks self-launch here only when no launcher started them")
        for name, default in defaults.items():  # FlagAI's other EnvArgs names (lora, wandb, ...): typed by default
            self.add_arg(name, default, type=_type_of(default))

    def add_arg(self, arg_name: str, default: Any = None, type: Callable[[Any], Any] = str, help: str = "",
                store_true: bool = False) -> None:
        """A flag ``--arg_name`` of your own, as FlagAI's ``add_arg`` (``store_true``: a switch)."""
        if store_true:
            self.parser.add_argument(f"--{arg_name}", action="store_true", help=help)
        else:
            self.parser.add_argument(f"--{arg_name}", default=default, type=type, help=help)

    def parse_args(self, args: Optional[Sequence[str]] = None) -> FlagAINamespace:
        """Parse ``args`` (default: the command line) into a :class:`FlagAINamespace`."""
        parsed = self.parser.parse_args(args, namespace=FlagAINamespace())
        if parsed.env_type == "pytorch":
            parsed.not_call_launch = True
        for name, value in vars(parsed).items():
            if isinstance(value, str):
                value = value.strip("'\"")
                if value.startswith("[") and value.endswith("]"):
                    value = [item for item in value.strip("[] ").replace(" ", "").split(",") if item]
                setattr(parsed, name, value)
        return parsed


def _type_of(default: Any) -> Callable[[Any], Any]:
    if isinstance(default, bool):
        return str2bool
    return type(default) if isinstance(default, (int, float)) else str
