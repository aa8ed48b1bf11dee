"""``FairScaleDriver`` (``driver="fairscale"``): data parallel with FairScale's sharding.

By default ShardedDataParallel + OSS (ZeRO stage 2): every rank holds the whole model, but owns
the optimizer state and the reduced gradients of only a share of the parameters, and broadcasts
its updated share after each step. ``fairscale_kwargs={"fsdp": True}`` selects FairScale's
FullyShardedDataParallel (parameters sharded too), which FairScale runs on CUDA only.

Started like the DDP driver, whose launch and failure handling it inherits: from a device list
(self-launched), under torchrun, or inside a process group the user initialised.

Saving is collective (``io.collective_save``): every rank must call ``save_model`` and
``save_training_state``; rank 0 writes. With ShardedDDP + OSS a checkpoint holds a plain model
state dict and plain optimizer state dicts, so it resumes under the DDP or single driver too.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, ContextManager, Iterator, Optional

import torch

from fastcore_train.backends.torch.parallel_driver import TorchDDPDriver
from fastcore_train.backends.torch.persistence import TorchPersistence, load_file
from fastcore_train.parallel.environment import RankFacts

try:
    from fairscale.nn import FullyShardedDataParallel as FairScaleFSDP
    from fairscale.nn.data_parallel import ShardedDataParallel
    from fairscale.optim import OSS
    from fairscale.optim.grad_scaler import ShardedGradScaler
except ModuleNotFoundError as error:  # depends on what is installed
    raise ImportError(
        'driver="fairscale" needs the fairscale package: pip install "fastcore-train[fairscale]" '
        "(with your torch pinned, e.g. pip install -c constraints.txt ..., so pip keeps your torch)."
    ) from error

_FAIRSCALE_KWARGS = {"fsdp", "oss_kwargs", "sdp_kwargs", "fsdp_kwargs"}
_DISPATCH_PREFIX = "model."  # the user's module inside the driver's method-dispatching wrapper


class FairScaleDriver(TorchDDPDriver):
    """One rank of a FairScale job.

    ``fairscale_kwargs``: ``fsdp`` (False: ShardedDDP + OSS; True: FairScale FSDP, CUDA only),
    ``oss_kwargs`` (to ``fairscale.optim.OSS``, e.g. ``broadcast_fp16``), ``sdp_kwargs`` (to
    ``ShardedDataParallel``, e.g. ``reduce_buffer_size``), ``fsdp_kwargs`` (to FairScale's
    ``FullyShardedDataParallel``).

    The optimizers given to the Trainer are re-created when the model is wrapped: as OSS over the
    same parameter groups (same class, defaults and group hyperparameters), or, for FSDP, over
    the wrapped parameters. The original optimizer's ``param_groups`` is then the live one's, so
    an LR scheduler built on it keeps acting on the optimizer that trains.
    """

    grad_scaler_type = ShardedGradScaler  # torch's GradScaler would hang with sharded gradients

    def __init__(self, model: torch.nn.Module, device: Any, world: RankFacts, fp16: bool = False,
                 fairscale_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
        options = dict(fairscale_kwargs or {})
        unknown = set(options) - _FAIRSCALE_KWARGS
        if unknown:
            raise TypeError(f"Unknown fairscale_kwargs {sorted(unknown)}; accepted: {sorted(_FAIRSCALE_KWARGS)}.")
        super().__init__(model, device, world, fp16=fp16, **kwargs)
        self._fsdp = bool(options.get("fsdp", False))
        self._oss_kwargs = dict(options.get("oss_kwargs", {}))
        self._sdp_kwargs = dict(options.get("sdp_kwargs", {}))
        self._fsdp_kwargs = dict(options.get("fsdp_kwargs", {}))
        if self._fsdp and self._device.type != "cuda":
            raise ValueError(
                "fairscale_kwargs={'fsdp': True} selects FairScale's FullyShardedDataParallel, which needs "
                f"CUDA, but this rank's device is {self._device}. On CPU use driver='torch_fsdp' (torch's own "
                "FSDP) or driver='fairscale' without 'fsdp' (ShardedDataParallel + OSS).")
        self._user_optimizers: list[torch.optim.Optimizer] = []
        self.io = FairScalePersistence(self)

    # ------------------------------------------------------------------ set-up
    def set_optimizers(self, optimizers: Any) -> None:
        if self._is_set_up:
            raise RuntimeError("driver='fairscale' re-creates the optimizers when it wraps the model, so they "
                               "must be given before set-up: pass them to the Trainer that builds this driver.")
        super().set_optimizers(optimizers)

    def wrap_model(self, dispatch: torch.nn.Module) -> torch.nn.Module:
        """ShardedDDP over OSS versions of the optimizers, or FairScale FSDP (CUDA)."""
        self._user_optimizers = list(self.optimizers)
        if self._fsdp:
            wrapped = FairScaleFSDP(dispatch, **self._fsdp_kwargs)
            self.optimizers = [self._fsdp_optimizer(opt, wrapped) for opt in self._user_optimizers]
            self._link_user_optimizers()
            return wrapped
        self.optimizers = [self._oss_optimizer(opt) for opt in self._user_optimizers]
        self._link_user_optimizers()
        if not self.optimizers:  # evaluation only: nothing to shard or synchronise
            return dispatch
        return ShardedDataParallel(dispatch, self.optimizers, **self._sdp_kwargs)

    def _oss_optimizer(self, optimizer: torch.optim.Optimizer) -> OSS:
        if isinstance(optimizer, OSS):
            return optimizer
        with _recreating(optimizer):
            oss = OSS(_fresh_groups(optimizer.param_groups), optim=type(optimizer),
                      **self._oss_kwargs, **optimizer.defaults)
        if optimizer.state:  # state the user loaded before training: OSS keeps this rank's share
            oss.load_state_dict(optimizer.state_dict())
        return oss

    def _fsdp_optimizer(self, optimizer: torch.optim.Optimizer, wrapped: torch.nn.Module) -> torch.optim.Optimizer:
        if self._fsdp_kwargs.get("flatten_parameters", True):
            if len(self._user_optimizers) != 1 or len(optimizer.param_groups) != 1:
                raise ValueError(
                    "FairScale FSDP flattens all parameters into one, so it takes one optimizer with one "
                    "parameter group; pass fairscale_kwargs={'fsdp': True, 'fsdp_kwargs': "
                    "{'flatten_parameters': False}} or use driver='torch_fsdp'.")
            params: Any = list(wrapped.parameters())
        else:  # FairScale shards the parameters in place: the optimizer's own ones
            params = _fresh_groups(optimizer.param_groups)
        if optimizer.state:
            raise ValueError("The optimizer already has state; FSDP re-shards the parameters so it cannot carry "
                             "over. Pass a fresh optimizer and restore state with Trainer.load_checkpoint.")
        with _recreating(optimizer):
            rebuilt = type(optimizer)(params, **optimizer.defaults)
        for new_group, old_group in zip(rebuilt.param_groups, optimizer.param_groups):
            new_group.update({k: v for k, v in old_group.items() if k != "params"})
        return rebuilt

    def _link_user_optimizers(self) -> None:
        """Give each user optimizer the live optimizer's param groups (LR schedulers act on them)."""
        for user, live in zip(self._user_optimizers, self.optimizers):
            if user is not live:
                user.param_groups = live.param_groups

    # ------------------------------------------------------------------ training
    def step(self) -> None:
        super().step()
        for user, live in zip(self._user_optimizers, self.optimizers):
            if user is not live:
                # torch's LR schedulers warn unless the optimizer they were built on has stepped.
                user._opt_called = True  # type: ignore[attr-defined]

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        """FairScale's sharded clipping (collective): each rank holds the reduced gradients of only
        its share of the parameters, so the norm is combined across ranks by FSDP's
        ``clip_grad_norm_`` or OSS's ``clip_grad_norm``."""
        if isinstance(self.model, FairScaleFSDP):
            self.precision.unscale_gradients(self._stepping_optimizers())
            return self.model.clip_grad_norm_(max_norm, norm_type)
        sharded = [optimizer for optimizer in self.optimizers if isinstance(optimizer, OSS)]
        if not sharded:
            return super().clip_grad_norm(max_norm, norm_type)
        if len(self.optimizers) != 1:
            raise ValueError(
                f"driver='fairscale' clips by norm through OSS.clip_grad_norm, which computes the norm of one "
                f"optimizer's parameters only; with {len(self.optimizers)} optimizers there is no global norm. "
                "Train with one optimizer (several parameter groups are fine) or clip by value.")
        self.precision.unscale_gradients(self._stepping_optimizers())
        return sharded[0].clip_grad_norm(max_norm, norm_type)

    def zero_grad(self) -> None:
        if isinstance(self.model, ShardedDataParallel):
            # ShardedDDP's gradients may be views into its reduce buckets, which only its own
            # zero_grad keeps intact; the optimizers' set_to_none would detach them from the buckets.
            self.model.zero_grad(set_to_none=self._set_grad_to_none)
        else:
            super().zero_grad()

    @contextlib.contextmanager
    def evaluate_context(self) -> Iterator[None]:
        """No gradients; with FSDP the evaluation forward runs on the gathered full parameters."""
        with torch.no_grad(), self.full_params():
            yield

    def full_params(self) -> ContextManager[Any]:
        """Inside it the user's model holds its full parameters on every rank (collective)."""
        if self._fsdp and isinstance(self.model, FairScaleFSDP):
            return self.model.summon_full_params(volatile=True)
        return contextlib.nullcontext()


class FairScalePersistence(TorchPersistence):
    """Collective saving: every rank calls; rank 0 writes plain torch state dicts."""

    collective_save = True

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Rank 0 writes the full model; with FSDP every rank helps gather it."""
        if not self.driver._fsdp:
            if self.driver.comm.rank == 0:
                super().save_model(path, only_state_dict=only_state_dict, **kwargs)
            return
        if not only_state_dict:
            raise ValueError("driver='fairscale' with FSDP saves state dicts only; pass only_state_dict=True.")
        state = self.driver.model.state_dict()  # collective: the full, unsharded state
        if self.driver.comm.rank == 0:
            torch.save({_strip(k): v for k, v in state.items()}, path, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        if not self.driver._fsdp:
            return super().load_model(path, only_state_dict=only_state_dict, **kwargs)
        state = load_file(path, map_location="cpu", **kwargs)
        self.driver.model.load_state_dict({_DISPATCH_PREFIX + k: v for k, v in state.items()})

    def save_training_state(self, path: Path) -> None:
        """Consolidate each optimizer's shards on rank 0 (every rank takes part); rank 0 writes."""
        states = []
        for optimizer in self.driver.optimizers:
            if isinstance(self.driver.model, FairScaleFSDP):
                states.append(self.driver.model.gather_full_optim_state_dict(optimizer))  # None off rank 0
            else:
                optimizer.consolidate_state_dict(recipient_rank=0)
                states.append(optimizer.state_dict() if self.driver.comm.rank == 0 else None)
        if self.driver.comm.rank == 0:
            torch.save(self.training_state(states), path)

    def load_training_state(self, path: Path) -> None:
        """Every rank reads the full state; OSS and FSDP keep this rank's share of it."""
        if isinstance(self.driver.model, FairScaleFSDP):
            state = load_file(path, map_location="cpu")  # FairScale's flat layout
            self.restore_training_state(state, lambda optimizer, full: optimizer.load_state_dict(
                self.driver.model.get_shard_from_optim_state_dict(full)))
        else:
            super().load_training_state(path)
        self.driver._link_user_optimizers()  # load_state_dict replaced the live optimizers' param groups


def _fresh_groups(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of param groups (same parameters and hyperparameters) for a new optimizer."""
    return [{**group, "params": list(group["params"])} for group in groups]


@contextlib.contextmanager
def _recreating(optimizer: torch.optim.Optimizer) -> Iterator[None]:
    """Turn a constructor that rejects the optimizer's own defaults into an error saying why."""
    try:
        yield
    except TypeError as error:
        raise TypeError(
            f"Cannot re-create {type(optimizer).__name__} from its defaults ({error}); driver='fairscale' needs "
            "optimizers whose constructor accepts (params, **optimizer.defaults), like torch.optim's.") from error


def _strip(key: str) -> str:
    return key[len(_DISPATCH_PREFIX):] if key.startswith(_DISPATCH_PREFIX) else key


def create_driver(model: torch.nn.Module, device: Any, fp16: bool, fairscale_kwargs: Optional[dict[str, Any]],
                  output_from_new_proc: str, **kwargs: Any) -> FairScaleDriver:
    """A FairScale driver for this rank: one device per rank (a device list, torchrun, or a process group)."""
    from fastcore_train.backends.torch import data_parallel_placement, with_launcher

    placement = data_parallel_placement("fairscale", model, device)
    driver = FairScaleDriver(model, placement.device, placement.facts, fp16=fp16, fairscale_kwargs=fairscale_kwargs, **kwargs)
    return with_launcher(driver, placement, output_from_new_proc)
