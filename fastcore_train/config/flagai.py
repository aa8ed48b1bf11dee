"""FlagAI's ``EnvTrainer`` argument names, mapped onto :class:`TrainerArgs`.

A FlagAI user keeps their words: ``from_flagai(env_type="pytorchDDP", epochs=3, num_gpus=2, ...)``
gives the TrainerArgs meaning the same run (``pytorchDDP``: the torch driver, data parallel over
``num_gpus`` devices; ``deepspeed``: the DeepSpeed driver with ``deepspeed_config``;
``deepspeed+mpu``: tensor parallel over ``model_parallel_size`` ranks, with the driver
``torch_model_parallel``). Names that
set up something other than the Trainer (batch size, learning rate, checkpoints) are an error
that says where they go here, so nothing is silently dropped. ``checkpoint_activations=True`` sets
``activation_checkpointing``; ``tensorboard`` (EnvArgs' flag) turns the TensorBoard log on or off.
:mod:`fastcore_train.config.flagai_env_args` reads FlagAI's command line (``EnvArgs``).
"""
from __future__ import annotations

from typing import Any, Optional

from fastcore_train.config.trainer_args import TrainerArgs
from fastcore_train.log import logger

#: FlagAI name -> TrainerArgs field it sets.
RENAMED = {"epochs": "n_epochs", "gradient_accumulation_steps": "accumulation_steps", "fp16": "fp16",
           "eval_interval": "evaluate_every", "seed": "sampler_seed", "log_interval": "report_every_n_batches",
           "tensorboard_dir": "report_dir", "experiment_name": "run_name", "load_dir": "resume_from"}
#: FlagAI name -> where that setting lives in fastcore_train.
ELSEWHERE = {
    "batch_size": "the dataloader (its batch_size; data.init_args in a config)",
    "lr": "the optimizer (optimizer.init_args.lr in a config)",
    "weight_decay": "the optimizer (optimizer.init_args.weight_decay)",
    "warm_up": "WarmupCallback(warmup=...) in callbacks",
    "clip_grad": "GradClipCallback(clip_value=...) in callbacks",
    "save_dir": "CheckpointCallback(folder=...) in callbacks, or output_dir of fastcore-train fit",
    "save_interval": "CheckpointCallback(every_n_batches=...) in callbacks",
    "save_optim": "checkpoints always hold the optimizer state",
    "save_rng": "checkpoints always hold the random states",
    "load_type": "resume_from (the whole training state) or resume_training=False (weights only)",
    "load_optim": "resume_training=True restores the optimizer",
    "load_rng": "resume_training=True restores the random states",
    "master_ip": "the launcher (torchrun --master_addr)", "master_port": "the launcher (torchrun --master_port)",
    "num_nodes": "the launcher (torchrun --nnodes)", "hostfile": "the launcher (deepspeed --hostfile)",
    "training_script": "the launcher's command line", "not_call_launch": "nothing: ranks self-launch only when "
    "no launcher started them", "local_rank": "the launcher's LOCAL_RANK variable",
    "num_checkpoints": "nothing: in FlagAI it is DeepSpeed's count of activation checkpoints for deepspeed+mpu "
    "(deepspeed.checkpointing.configure), not a number of saved checkpoints; FlagAI keeps every saved one, as "
    "CheckpointCallback(every_n_batches=...) does (topk=k keeps the k best)",
}
ENV_TYPES = ("pytorch", "pytorchDDP", "deepspeed", "deepspeed+mpu")


def device_name(device: Any) -> Optional[str]:
    """``pytorch_device`` as text: FlagAI's examples pass a device object
    (``torch.device("cuda" if torch.cuda.is_available() else "cpu")``), which means its type
    (``cpu``, ``cuda``) or, with an index, ``cuda:1``."""
    if device is None or isinstance(device, str):
        return device
    kind = getattr(device, "type", None)
    if isinstance(kind, str):
        index = getattr(device, "index", None)
        return kind if index is None else f"{kind}:{index}"
    raise TypeError(f"pytorch_device={device!r}: give 'cpu', 'cuda', 'cuda:N' or a torch.device.")


def from_flagai(env_type: str = "pytorch", pytorch_device: Optional[str] = None, num_gpus: int = 1,
                deepspeed_config: Any = None, model_parallel_size: int = 1, **names: Any) -> TrainerArgs:
    """The :class:`TrainerArgs` of a FlagAI ``EnvTrainer`` set up with these arguments.

    ``pytorch_device`` left out means what FlagAI does: ``cpu`` for ``pytorch``, GPUs for the data
    parallel types; ``pytorch_device="cpu"`` (or ``torch.device("cpu")``) with ``pytorchDDP`` runs
    ``num_gpus`` ranks on the CPU.
    ``deepspeed+mpu`` gives ``driver="torch_model_parallel"`` with ``tp_size=model_parallel_size``
    (the data-parallel rest, ``num_gpus / model_parallel_size``, sharded with FSDP2, which takes the
    place of ``deepspeed_config``'s ZeRO); which layers to split is the model's: set
    ``torch_model_parallel_kwargs["tp_plan"]`` unless it has a Hugging Face ``tp_plan``.
    """
    pytorch_device = device_name(pytorch_device)
    if env_type not in ENV_TYPES:
        raise ValueError(f"env_type {env_type!r} is not supported; FlagAI's {', '.join(ENV_TYPES)} are "
                         "('bmtrain' has no counterpart here).")
    if env_type != "deepspeed+mpu" and model_parallel_size != 1:
        raise ValueError(f"model_parallel_size={model_parallel_size} splits layers across ranks, which FlagAI does with "
                         "env_type='deepspeed+mpu'; pass that env_type (here: driver='torch_model_parallel').")
    tensorboard = names.pop("tensorboard", None)
    activation_checkpointing = names.pop("checkpoint_activations", False)
    unknown = sorted(set(names) - set(RENAMED) - set(ELSEWHERE))
    if unknown:
        raise ValueError(f"Unknown FlagAI argument(s) {unknown}; known: {sorted([*RENAMED, *ELSEWHERE])}.")
    moved = {name: ELSEWHERE[name] for name in names if name in ELSEWHERE}
    if moved:
        raise ValueError("These FlagAI arguments are not Trainer arguments here: " +
                         "; ".join(f"{name} -> {where}" for name, where in moved.items()) + ".")
    values = {RENAMED[name]: value for name, value in names.items()}
    if env_type == "pytorch":
        values.update(driver="torch", device=pytorch_device or "cpu")
    elif env_type == "pytorchDDP":
        devices = ["cpu"] * num_gpus if pytorch_device == "cpu" else list(range(num_gpus))
        values.update(driver="torch", device=devices)
    elif env_type == "deepspeed+mpu":
        if model_parallel_size < 1 or num_gpus % model_parallel_size:
            raise ValueError(f"model_parallel_size={model_parallel_size} must divide num_gpus={num_gpus}.")
        devices = ["cpu"] * num_gpus if pytorch_device == "cpu" else list(range(num_gpus))
        values.update(driver="torch_model_parallel", device=devices,
                      torch_model_parallel_kwargs={"tp_size": model_parallel_size})
        if deepspeed_config is not None:
            logger.warning("from_flagai(env_type='deepspeed+mpu'): deepspeed_config is not used; FSDP2 shards the "
                           "data-parallel ranks instead of ZeRO. Set fp16, accumulation and clipping with the "
                           "Trainer's own arguments.")
    else:
        devices = ["cpu"] * num_gpus if pytorch_device == "cpu" else list(range(num_gpus))
        values.update(driver="deepspeed", device=devices)
        if deepspeed_config is not None:
            values["deepspeed_kwargs"] = {"config": deepspeed_config}
    if tensorboard is not None:  # EnvArgs' --tensorboard flag
        values["report_to"] = ["tensorboard"] if tensorboard else []
    elif "report_dir" in values or "report_every_n_batches" in values:
        values.setdefault("report_to", ["tensorboard"])  # FlagAI writes TensorBoard logs
    if activation_checkpointing:
        values["activation_checkpointing"] = True
    return TrainerArgs(**values)

