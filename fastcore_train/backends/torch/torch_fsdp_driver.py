"""``TorchFSDPDriver`` (``driver="torch_fsdp"``): data parallel with torch's FullyShardedDataParallel.

Parameters, gradients and optimizer state are sharded across ranks; FSDP gathers a layer's
parameters for its forward and backward. It runs on CUDA (nccl) and on CPU (gloo), started like
the DDP driver, whose launch and failure handling it inherits: from a device list (self-launched),
under torchrun, or inside a process group the user initialised.

The model is wrapped with ``use_orig_params=True``, which keeps every ``Parameter`` object of the
user's model (FSDP points their data at its shards): the optimizers the user built before the
Trainer wrapped the model therefore already hold the wrapped parameters, in their order, and are
used as they are (checked at set-up), so LR schedulers built on them keep working.

Outside forward and backward the user's model holds only this rank's shards; evaluation runs on
the gathered full parameters (``full_params``), and checkpoints are written through
``torch.distributed.checkpoint``:

- ``state_dict_type="full"`` (default): the unsharded model state dict, with the user model's own
  keys, written by rank 0 (loads into any torch driver), and full optimizer state dicts keyed by
  parameter name;
- ``state_dict_type="sharded"``: ``model<suffix>`` and ``training_state<suffix>`` become folders
  holding one file per rank plus metadata (``torch.distributed.checkpoint`` format).

Saving and loading are collective (``io.collective_save``): every rank must call them. Loading reads
either layout, whatever ``state_dict_type`` says.
"""
from __future__ import annotations

import contextlib
import functools
from datetime import timedelta
from pathlib import Path
from typing import Any, ContextManager, Iterator, Optional

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_optimizer_state_dict, set_model_state_dict,
                                                     set_optimizer_state_dict)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

from fastcore_train.backends.torch.parallel_driver import TorchDDPDriver
from fastcore_train.backends.torch.persistence import TorchPersistence, load_file
from fastcore_train.backends.torch.sharded_state import (load_model_folder, load_training_state_folder, prefixed,
                                                         strip)
from fastcore_train.drivers.persistence import HostSnapshot, PendingWrites
from fastcore_train.drivers.precision import GRAD_SCALER_KEY
from fastcore_train.parallel.environment import RankFacts
from fastcore_train.parallel.watchdog import framework_timeout

STATE_DICT_TYPES = ("full", "sharded")
_HYBRID = (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2)


class TorchFSDPDriver(TorchDDPDriver):
    """One rank of a torch FSDP job.

    ``torch_fsdp_kwargs``: ``state_dict_type`` (``"full"`` or ``"sharded"``, how checkpoints are
    written); everything else goes to ``FullyShardedDataParallel`` (``sharding_strategy``,
    ``auto_wrap_policy``, ``mixed_precision``, ``cpu_offload``...). The driver sets ``device_id``
    (this rank's device) and ``use_orig_params=True`` itself.
    """

    # Gradients are sharded: the scaler must check every rank's shard for inf/NaN.
    grad_scaler_type = functools.partial(ShardedGradScaler, "cuda")

    def __init__(self, model: torch.nn.Module, device: Any, world: RankFacts, fp16: bool = False,
                 torch_fsdp_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
        options = dict(torch_fsdp_kwargs or {})
        self.state_dict_type = options.pop("state_dict_type", "full")
        if self.state_dict_type not in STATE_DICT_TYPES:
            raise ValueError(f"torch_fsdp_kwargs['state_dict_type'] must be one of {STATE_DICT_TYPES}, "
                             f"got {self.state_dict_type!r}.")
        if "device_id" in options:
            raise ValueError("torch_fsdp_kwargs must not set device_id: the driver puts each rank on its "
                             "device; choose the devices with the Trainer's device= argument.")
        if not options.pop("use_orig_params", True):
            raise ValueError("driver='torch_fsdp' needs use_orig_params=True, which keeps your model's Parameter "
                             "objects so that your optimizers train the sharded model; leave it out.")
        super().__init__(model, device, world, fp16=fp16, **kwargs)
        self._fsdp_kwargs = options
        self.io = TorchFSDPPersistence(self)

    # ------------------------------------------------------------------ set-up
    def wrap_model(self, dispatch: torch.nn.Module) -> torch.nn.Module:
        """``FullyShardedDataParallel`` on this rank's device, keeping the original parameters."""
        options = {"device_id": self._device, "use_orig_params": True, **self._fsdp_kwargs}
        if self._device.type == "cuda":
            options.setdefault("sync_module_states", True)
        elif not options.get("sync_module_states"):  # FSDP syncs on GPUs only; start equal like DDP
            for tensor in dispatch.state_dict().values():
                dist.broadcast(tensor, src=0)
        hybrid = options.get("sharding_strategy") in _HYBRID
        if "process_group" not in options and "device_mesh" not in options and not hybrid:
            # A device mesh makes sharded state dicts DTensors (ShardedTensor is deprecated).
            options["device_mesh"] = init_device_mesh(self._device.type, (self.comm.world_size,))
        wrapped = FullyShardedDataParallel(dispatch, **options)
        self._check_optimizers(wrapped)
        return wrapped

    def _check_optimizers(self, wrapped: torch.nn.Module) -> None:
        """The optimizers must hold the wrapped model's parameters, and no state yet."""
        wrapped_params = {id(p) for p in wrapped.parameters()}
        for optimizer in self.optimizers:
            if any(id(p) not in wrapped_params for group in optimizer.param_groups for p in group["params"]):
                raise ValueError(
                    f"The {type(optimizer).__name__} optimizer holds parameters that are not the model's; build "
                    "it from the model passed to the Trainer (e.g. torch.optim.SGD(model.parameters(), ...)).")
            if optimizer.state:
                raise ValueError(
                    f"The {type(optimizer).__name__} optimizer already has state, shaped for unsharded "
                    "parameters; pass a fresh optimizer and restore state with Trainer.load_checkpoint.")

    def set_optimizers(self, optimizers: Any) -> None:
        if self._is_set_up:
            raise RuntimeError("driver='torch_fsdp' checks the optimizers when it wraps the model, so they must "
                               "be given before set-up: pass them to the Trainer that builds this driver.")
        super().set_optimizers(optimizers)

    # ------------------------------------------------------------------ gradient clipping
    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        """FSDP's own ``clip_grad_norm_``: each rank holds a shard of the gradients, so the norm is
        combined across ranks before every rank scales its shard (collective)."""
        if not isinstance(self.model, FullyShardedDataParallel):
            return super().clip_grad_norm(max_norm, norm_type)
        self.precision.unscale_gradients(self._stepping_optimizers())
        return self.model.clip_grad_norm_(max_norm, norm_type)

    # ------------------------------------------------------------------ evaluation
    def full_params(self) -> ContextManager[Any]:
        """Inside it the user's model holds its full parameters on every rank (collective)."""
        if isinstance(self.model, FullyShardedDataParallel):
            return FullyShardedDataParallel.summon_full_params(self.model, writeback=False)
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def evaluate_context(self) -> Iterator[None]:
        """No gradients, full parameters: ranks may then evaluate different numbers of batches."""
        with torch.no_grad(), self.full_params():
            yield


class TorchFSDPPersistence(TorchPersistence):
    """Collective saving through ``torch.distributed.checkpoint``: full or sharded state dicts.

    Asynchronous checkpoints: a full state dict is gathered at the save point (collective, on the
    training thread), copied to host memory on rank 0 and written there by the shared background
    thread (:mod:`fastcore_train.checkpoint.async_writer`); a sharded one goes through
    ``torch.distributed.checkpoint.async_save`` on every rank (:meth:`start_async_write`).
    """

    collective_save = True

    def _options(self, full: bool) -> StateDictOptions:
        # Offloading gathers to rank 0 only; on CPU torch's offload path crashes, and is moot anyway.
        return StateDictOptions(full_state_dict=full, cpu_offload=full and self.driver.device.type == "cuda")

    @property
    def _full(self) -> bool:
        return self.driver.state_dict_type == "full"

    def model_state(self) -> dict[str, Any]:
        """The model's state dict with the user model's keys, full or sharded (collective)."""
        return {strip(key): value for key, value in
                get_model_state_dict(self.driver.model, options=self._options(self._full)).items()}

    def training_state_object(self) -> dict[str, Any]:
        """Optimizer (and grad scaler) state: :meth:`training_state` when full, else keyed for DCP (collective)."""
        optimizers = [get_optimizer_state_dict(self.driver.model, optimizer, options=self._options(self._full))
                      for optimizer in self.driver.optimizers]
        if self._full:
            return self.training_state(optimizers)
        state: dict[str, Any] = {f"optimizer_{i}": osd for i, osd in enumerate(optimizers)}
        scaler = self.driver.precision.state_dict()
        if scaler is not None:
            state[GRAD_SCALER_KEY] = scaler
        return state

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """The full state dict (rank 0 writes ``path``) or a sharded one (folder ``path``, every rank)."""
        if not only_state_dict:
            raise ValueError("driver='torch_fsdp' saves state dicts only; pass only_state_dict=True.")
        state = self.model_state()
        if not self._full:
            dcp.save(state, checkpoint_id=path)
        elif self.driver.comm.rank == 0:
            torch.save(state, path, **kwargs)

    def save_training_state(self, path: Path) -> None:
        """Optimizer (and grad scaler) state, full on rank 0 or sharded into folder ``path``."""
        state = self.training_state_object()
        if not self._full:
            dcp.save(state, checkpoint_id=path)
        elif self.driver.comm.rank == 0:
            torch.save(state, path)

    # ------------------------------------------------------------------ asynchronous checkpoints
    @property
    def supports_snapshot(self) -> bool:
        return True

    def begin_snapshot(self) -> HostSnapshot:
        """Full: gathered on every rank now (collective, on the training thread), then host copies
        as for any torch driver (:meth:`Persistence.begin_snapshot`), on rank 0 only (the others
        write nothing). Sharded: nothing here, :meth:`start_async_write` writes it."""
        if not self._full:
            return HostSnapshot(lambda: (None, None))
        snapshot = super().begin_snapshot()
        return snapshot if self.driver.comm.rank == 0 else HostSnapshot(lambda: (None, None))

    def write_object(self, obj: Any, path: Path) -> None:
        if obj is not None:  # (None: another rank's part, or DCP's)
            torch.save(obj, path)

    def start_async_write(self, model_path: Path, state_path: Path) -> Optional[PendingWrites]:
        """Sharded: ``dcp.async_save`` of the model and of the training state into their folders.

        Each copies this rank's shards to host memory now and writes them in a thread of its own,
        whose collectives run on a gloo process group of its own (:meth:`_checkpoint_groups`), never
        on the training's group."""
        if self._full:
            return None
        groups = self._checkpoint_groups()
        return PendingWrites([dcp.async_save(state, checkpoint_id=path, process_group=group)
                              for state, path, group in ((self.model_state(), model_path, groups[0]),
                                                         (self.training_state_object(), state_path, groups[1]))])

    def _checkpoint_groups(self) -> tuple[Any, Any]:
        """Two gloo process groups for DCP's background writes, made at the first asynchronous save
        (``new_group`` is collective: every rank is at that save, on its training thread). One per
        write: each write's thread runs its own collectives, which must not interleave."""
        if getattr(self, "_groups", None) is None:
            timeout = timedelta(seconds=framework_timeout(self.driver.comm.timeout))
            self._groups = (dist.new_group(backend="gloo", timeout=timeout),
                            dist.new_group(backend="gloo", timeout=timeout))
        return self._groups

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Every rank loads; a folder is a sharded checkpoint, a file a full state dict."""
        path = Path(path)
        if path.is_dir():
            load_model_folder(self.driver.model, path)
            return
        state = load_file(path, map_location="cpu", **kwargs)
        if isinstance(state, torch.nn.Module):  # a whole model another driver pickled
            state = state.state_dict()
        set_model_state_dict(self.driver.model, prefixed(state), options=StateDictOptions(full_state_dict=True))

    def load_training_state(self, path: Path) -> None:
        path = Path(path)
        if path.is_dir():
            load_training_state_folder(self, self.driver.model, path)
            return
        state = load_file(path, map_location="cpu")
        self.check_optimizer_count(len(state["optimizers"]))
        for optimizer, optimizer_state in zip(self.driver.optimizers, state["optimizers"]):
            set_optimizer_state_dict(self.driver.model, optimizer, optimizer_state,
                                     options=StateDictOptions(full_state_dict=True))
        self.driver.precision.load_state_dict(state.get(GRAD_SCALER_KEY))


def create_driver(model: torch.nn.Module, device: Any, fp16: bool, torch_fsdp_kwargs: Optional[dict[str, Any]],
                  output_from_new_proc: str, **kwargs: Any) -> TorchFSDPDriver:
    """A torch FSDP driver for this rank: one device per rank (a device list, torchrun, or a process group)."""
    from fastcore_train.backends.torch import data_parallel_placement, with_launcher

    placement = data_parallel_placement("torch_fsdp", model, device)
    driver = TorchFSDPDriver(model, placement.device, placement.facts, fp16=fp16, torch_fsdp_kwargs=torch_fsdp_kwargs, **kwargs)
    return with_launcher(driver, placement, output_from_new_proc)
