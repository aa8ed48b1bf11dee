"""``TorchDeepSpeedDriver``: data parallel through a DeepSpeed engine (ZeRO stages 0-3).

Launched exactly like :class:`TorchDDPDriver` (a device list self-launches, torchrun or a process
group the user set up supply the ranks), with the same failure handling. The model is wrapped
in the method-dispatching module and handed to ``deepspeed.initialize`` together with the
user's optimizer, so every training call (``train_step`` included) runs through the engine's
forward, where ZeRO's hooks live; backward and step go through the engine too.

``deepspeed_kwargs={"config": {...}}`` is a DeepSpeed config (dict or JSON path). Defaults where
it is silent:

- ``train_micro_batch_size_per_gpu`` 1: bookkeeping only, the Trainer does its own batching;
- ``gradient_accumulation_steps`` 1, always: accumulate with ``Trainer(accumulation_steps=n)``;
  the driver marks the non-final micro-batches as no accumulation boundary for the engine, which
  then accumulates without reducing (the Trainer divides the loss by ``n`` itself);
- ``zero_allow_untested_optimizer`` true: the Trainer's optimizer is a client optimizer;
- ``gradient_clipping`` 0: DeepSpeed's own default (1.0) would clip where other drivers do not.

On CUDA ``fp16=True`` turns on DeepSpeed's ``fp16`` mode unless the config has an ``fp16``,
``bf16`` or ``torch_autocast`` section; on CPU it means bfloat16 autocast, as for the other torch
drivers. An enabled ``fp16`` section that does not say ``auto_cast`` gets ``auto_cast: true``
(DeepSpeed then casts the float batches to half, on CUDA and on CPU alike). With ``Trainer(optimizers=None)`` the config's ``optimizer`` section
(FlagAI's and DeepSpeed's own examples have one) is built by DeepSpeed (under ZeRO-Offload its
``Adam`` is DeepSpeed's CPU Adam); a config with that section and a Trainer optimizer is refused.

Checkpoints are collective (``io.collective_save``): ``save_model`` gathers the full weights and
rank 0 writes a plain torch state dict; ``save_training_state`` writes a DeepSpeed checkpoint
folder (``engine.save_checkpoint``: every rank writes its own optimizer shard), which is resumed
with the same number of ranks.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import types
from pathlib import Path
from typing import Any, ContextManager, Iterator, Optional, Union

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from fastcore_train.backends.torch.parallel_driver import TorchDDPDriver
from fastcore_train.backends.torch.persistence import TorchPersistence, load_file
from fastcore_train.backends.torch.precision import DeepSpeedPrecision
from fastcore_train.backends.torch.world import world_from_environment
from fastcore_train.parallel.environment import RankFacts
from fastcore_train.parallel.launch import free_port
from fastcore_train.parallel.environment import TORCHRUN

# deepspeed itself (seconds to import) is imported where it is used, after a self-launching rank 0
# has started the other ranks, so that their start-up overlaps; its absence is reported at once.
if importlib.util.find_spec("deepspeed") is None:  # pragma: no cover - depends on the environment
    raise ImportError('driver="deepspeed" needs the deepspeed package: DS_BUILD_OPS=0 pip install '
                      '"fastcore-train[deepspeed]" (keep your torch pinned, e.g. with a constraints file).')

__all__ = ["TorchDeepSpeedDriver", "create_driver"]

#: The tag of the DeepSpeed checkpoint inside a training-state folder.
CHECKPOINT_TAG = "fastcore_train"
_DEEPSPEED_KWARGS = {"config"}
_PRECISION_KEYS = ("fp16", "bf16", "torch_autocast")


def build_config(user_config: Union[None, str, os.PathLike, dict[str, Any]], fp16: bool,
                 on_cuda: bool) -> dict[str, Any]:
    """The DeepSpeed config: the user's, completed with what the Trainer's way of training needs."""
    if user_config is None:
        config: dict[str, Any] = {}
    elif isinstance(user_config, dict):
        config = dict(user_config)
    elif isinstance(user_config, (str, os.PathLike)):
        if not Path(user_config).is_file():
            raise FileNotFoundError(f"No DeepSpeed config file at {str(user_config)!r}.")
        import hjson  # DeepSpeed's own config reader (a superset of JSON), installed with it
        with open(user_config, encoding="utf-8") as handle:
            config = dict(hjson.load(handle))
    else:
        raise TypeError(f"deepspeed_kwargs['config'] must be a dict or a path to a DeepSpeed JSON config, "
                        f"got {type(user_config).__name__}.")
    if config.get("gradient_accumulation_steps", 1) != 1:
        raise ValueError(
            f"deepspeed config sets gradient_accumulation_steps={config['gradient_accumulation_steps']}; the "
            "Trainer feeds the engine one micro-batch per call, so accumulate with Trainer(accumulation_steps=n) "
            "and leave gradient_accumulation_steps at 1.")
    if _enabled(config.get("fp16")) and "auto_cast" not in config["fp16"]:
        # The Trainer's batches are float: without auto_cast DeepSpeed's half model would refuse them
        # ("Input type (float) and bias type (c10::Half)"); FlagAI casts them itself (FP16_Module).
        config["fp16"] = {**config["fp16"], "auto_cast": True}
    config["gradient_accumulation_steps"] = 1
    if "train_batch_size" not in config:
        config.setdefault("train_micro_batch_size_per_gpu", 1)
    config.setdefault("zero_allow_untested_optimizer", True)
    # DeepSpeed (0.19.8 at least) clips gradients to norm 1.0 unless told otherwise; the Trainer's other
    # drivers never clip on their own, so neither does this one (set gradient_clipping to clip).
    config.setdefault("gradient_clipping", 0.0)
    if fp16 and on_cuda and not any(key in config for key in _PRECISION_KEYS):
        # DeepSpeed keeps fp32 master weights and scales the loss dynamically; auto_cast converts
        # floating-point inputs to half so batches need no manual casting.
        config["fp16"] = {"enabled": True, "auto_cast": True}
    return config


def _enabled(section: Any) -> bool:
    """Whether a config section such as ``"fp16": {"enabled": true}`` is switched on."""
    return isinstance(section, dict) and section.get("enabled", False) is True


class TorchDeepSpeedDriver(TorchDDPDriver):
    """One rank of a DeepSpeed job; see the module docstring for configuration and checkpoints.

    After set-up ``self.model`` (and ``self.engine``) is the ``DeepSpeedEngine``; ``unwrap_model()``
    is the user's module, whose parameters are placeholders under ZeRO-3: use
    :meth:`full_state_dict` (collective) or ``Trainer.save_model`` for its weights.
    """

    def __init__(self, model: torch.nn.Module, device: Any, world: RankFacts, fp16: bool = False,
                 deepspeed_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
        if isinstance(model, DistributedDataParallel):
            raise ValueError("driver='deepspeed' wraps the model in a DeepSpeed engine itself; pass the model "
                             "without DistributedDataParallel.")
        deepspeed_kwargs = dict(deepspeed_kwargs or {})
        unknown = set(deepspeed_kwargs) - _DEEPSPEED_KWARGS
        if unknown:
            raise TypeError(f"Unknown deepspeed_kwargs {sorted(unknown)}; accepted: {sorted(_DEEPSPEED_KWARGS)} "
                            "(put DeepSpeed settings inside deepspeed_kwargs['config']).")
        for other in ("fairscale_kwargs", "torch_fsdp_kwargs"):
            kwargs.pop(other, None)
        super().__init__(model, device, world, fp16=fp16, **kwargs)
        self._config = build_config(deepspeed_kwargs.get("config"), fp16, self._device.type == "cuda")
        self.engine: Optional[Any] = None
        self.precision: DeepSpeedPrecision = DeepSpeedPrecision(self._device, fp16)  # no grad scaler
        self.io = DeepSpeedPersistence(self)

    # ------------------------------------------------------------------ set-up
    def set_optimizers(self, optimizers: Any) -> None:
        """The Trainer's optimizer, or ``None`` where the config's ``optimizer`` section has DeepSpeed
        build it (``self.optimizers`` then holds the engine's optimizer once set up)."""
        in_config = "optimizer" in self._config
        if optimizers is None and in_config:
            self.optimizers = []
            return
        if in_config:
            raise ValueError("deepspeed config has an 'optimizer' section and the Trainer was given optimizers too; "
                             "pass optimizers=None to have DeepSpeed build the config's optimizer, or remove the "
                             "section.")
        if optimizers is None:
            raise ValueError("optimizers is required: pass an optimizer to the Trainer, or pass optimizers=None with "
                             "an 'optimizer' section in the DeepSpeed config.")
        super().set_optimizers(optimizers)
        if len(self.optimizers) != 1:
            raise ValueError(f"driver='deepspeed' trains with exactly one optimizer (a DeepSpeed engine wraps one), "
                             f"got {len(self.optimizers)}.")

    def setup(self) -> None:
        if self.comm.world_size == 1 and not dist.is_initialized() and world_from_environment() is None:
            # One process, no launcher: give torch.distributed (and DeepSpeed, which otherwise looks
            # for MPI) the rendezvous facts of a world of one.
            os.environ.update(TORCHRUN.variables_for(0, 1, "127.0.0.1", free_port()))
        super().setup()  # joins the process group, calls wrap_model

    def wrap_model(self, dispatch: torch.nn.Module) -> Any:
        """Build the DeepSpeed engine around the dispatching module and the user's optimizer."""
        import deepspeed
        from deepspeed.accelerator import get_accelerator
        accelerator = get_accelerator().device_name()
        if accelerator != self._device.type:
            raise ValueError(
                f"DeepSpeed chose its {accelerator!r} accelerator but this rank's device is {str(self._device)!r}. "
                f"Set DS_ACCELERATOR={self._device.type} before starting Python, or pass a {accelerator} device.")
        deepspeed.init_distributed(dist_backend=dist.get_backend())  # reuses the process group set up above
        args = types.SimpleNamespace(device_rank=self._device.index) if self._device.type == "cuda" else None
        engine, _, _, _ = deepspeed.initialize(args=args, model=dispatch,
                                               optimizer=self.optimizers[0] if self.optimizers else None,
                                               config=self._config)
        self.engine = self.precision.engine = engine
        if not self.optimizers:  # built by DeepSpeed from the config's "optimizer" section
            self.optimizers = [engine.optimizer]
        return engine

    @property
    def zero_stage(self) -> int:
        """The ZeRO stage the engine runs (0 before set-up)."""
        return self.engine.zero_optimization_stage() if self.engine is not None else 0

    # ------------------------------------------------------------------ forward / backward
    def evaluate_context(self) -> ContextManager[Any]:
        """No gradients; under ZeRO-3 also gather the weights once and lift ZeRO's hooks, so that
        ranks evaluating different numbers of batches need no collective per forward."""
        if self.zero_stage != 3:
            return torch.no_grad()
        from deepspeed.runtime.zero.stage3 import unwrap_model_for_generation
        stack = contextlib.ExitStack()
        stack.enter_context(torch.no_grad())
        stack.enter_context(unwrap_model_for_generation(self.engine))
        return stack

    def no_sync(self) -> ContextManager[Any]:
        """A micro-batch that is not the last of an accumulation group: the engine accumulates
        gradients without reducing them (ZeRO 2/3 keep partitioning as they need)."""
        return self._not_a_boundary()

    @contextlib.contextmanager
    def _not_a_boundary(self) -> Iterator[None]:
        self.engine.set_gradient_accumulation_boundary(False)
        try:
            yield
        finally:
            self.engine.set_gradient_accumulation_boundary(True)

    def backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss)

    def step(self) -> None:
        self.engine.step()  # steps the optimizer (and any DeepSpeed LR scheduler), then clears gradients

    def zero_grad(self) -> None:
        self.engine.zero_grad()

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> float:
        """Not from outside the engine: DeepSpeed clips inside ``engine.step()`` (its gradients may be
        partitioned, flattened or loss-scaled until then) with the config's ``gradient_clipping``."""
        raise NotImplementedError(
            "driver='deepspeed' cannot clip gradients from a callback: DeepSpeed clips by global 2-norm inside "
            f"engine.step(). Set it in the DeepSpeed config instead, e.g. deepspeed_kwargs={{'config': "
            f"{{'gradient_clipping': {max_norm!r}}}}}, and drop the gradient-clipping callback.")

    def clip_grad_value(self, clip_value: float) -> None:
        raise NotImplementedError(
            "driver='deepspeed' cannot clip gradients by value: DeepSpeed only clips by global 2-norm, set with "
            "'gradient_clipping' in its config (deepspeed_kwargs={'config': {'gradient_clipping': max_norm}}).")

    # ------------------------------------------------------------------ weights
    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The user's module's complete state dict on CPU, on every rank.

        Collective under ZeRO-3 (every rank must call it): partitioned weights are gathered.
        """
        module = self._user_module
        with self._gathered(modifier_rank=None):
            return {name: tensor.detach().cpu().clone() for name, tensor in module.state_dict().items()}

    def _gathered(self, modifier_rank: Optional[int]) -> ContextManager[Any]:
        if self.zero_stage != 3:
            return contextlib.nullcontext()
        from deepspeed.runtime.zero import GatheredParameters  # deepspeed.zero.GatheredParameters
        return GatheredParameters(list(self._user_module.parameters()), modifier_rank=modifier_rank)

    def load_full_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load a complete state dict into the module (every rank must call it) and refresh the
        optimizer's fp32 master copy of the weights."""
        with self._gathered(modifier_rank=0):  # under ZeRO-3 rank 0's copy is re-partitioned to all
            self._user_module.load_state_dict(state)
        optimizer = getattr(self.engine, "optimizer", None)
        if hasattr(optimizer, "refresh_fp32_params"):
            optimizer.refresh_fp32_params()

    # ------------------------------------------------------------------ failures
    def on_exception(self, exception: BaseException) -> None:
        if self.comm.world_size > 1:  # one process has no peers to stop: let the exception propagate
            super().on_exception(exception)


class DeepSpeedPersistence(TorchPersistence):
    """Collective saving: the gathered full weights (rank 0 writes) and a DeepSpeed checkpoint
    folder for the training state (every rank writes its shard); every rank calls these."""

    collective_save = True

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        if not only_state_dict:
            raise ValueError("driver='deepspeed' saves the model as a state dict gathered from every rank; pickling "
                             "the module itself (only_state_dict=False) would capture DeepSpeed's hooks and "
                             "partitioned parameters. Pass only_state_dict=True.")
        state = self.driver.full_state_dict()
        if self.driver.comm.is_global_zero():
            torch.save(state, path, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        loaded = self.as_state_dict(load_file(path, map_location="cpu", **kwargs), path, torch.nn.Module)
        self.driver.load_full_state_dict(loaded)

    def save_training_state(self, path: Path) -> None:
        """Write a DeepSpeed checkpoint folder at ``path``: weights, each rank's optimizer (and loss
        scaler) shard, the engine's counters. Every rank writes its own files."""
        self.driver.engine.save_checkpoint(str(path), tag=CHECKPOINT_TAG)

    def load_training_state(self, path: Path) -> None:
        if not Path(path).is_dir():
            raise ValueError(f"{str(path)!r} is not a DeepSpeed checkpoint folder; this checkpoint was not written "
                             "by driver='deepspeed'.")
        load_path, _ = self.driver.engine.load_checkpoint(str(path), tag=CHECKPOINT_TAG, load_optimizer_states=True,
                                                   load_lr_scheduler_states=True)
        if load_path is None:
            raise ValueError(f"DeepSpeed could not load the training state in {str(path)!r}.")


def create_driver(model: torch.nn.Module, device: Any, fp16: bool, deepspeed_kwargs: Optional[dict[str, Any]],
                  output_from_new_proc: str, **kwargs: Any) -> TorchDeepSpeedDriver:
    """``driver="deepspeed"``: the ranks come from a launcher's environment (torchrun), a process
    group the user initialised, or a device list (this process starts the other ranks); a single
    device trains in one process (a DeepSpeed world of one)."""
    from fastcore_train.backends.torch import place_ranks, with_launcher

    placement = place_ranks(device)
    driver = TorchDeepSpeedDriver(model, placement.device, placement.facts, fp16=fp16,
                                  deepspeed_kwargs=deepspeed_kwargs, **kwargs)
    return with_launcher(driver, placement, output_from_new_proc)
