"""``TorchModelParallelDriver`` (``driver="torch_model_parallel"``): tensor parallel and FSDP2 on a
2-D device mesh, for models too big for one device.

The ranks form a ``(dp, tp)`` mesh (``dp_size = world_size / tp_size``; the ranks of one
tensor-parallel group are consecutive). The model's layers are split across the ``tp`` dimension
by a plan (torch's ``parallelize_module``: parameters become DTensors), then the ``dp`` dimension
shards what is left with FSDP2 (``fully_shard``). A tensor-parallel group computes one batch
together, so the data is sharded by data-parallel rank only (:meth:`data_shard`); evaluation and
prediction with ``tp_size > 1`` run the whole dataloader on every rank (their results need no
aggregation).

Checkpoints go through ``torch.distributed.checkpoint`` (the persistence of ``driver="torch_fsdp"``):
by default sharded, each rank writing its shards into the checkpoint's ``model.pt`` and
``training_state.pt`` folders; loading reshards them into any mesh, into FSDP, DDP or one process.
Launching, failure handling and asynchronous checkpoints are those of the DDP and FSDP drivers.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Iterator, Optional, Union

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

try:  # public since torch 2.6
    from torch.distributed.fsdp import FSDPModule, fully_shard
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor.parallel import (ColwiseParallel, ParallelStyle, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
except ImportError as error:  # pragma: no cover - the tested torch has them
    raise ImportError(f"driver='torch_model_parallel' needs torch >= 2.6 (FSDP2's fully_shard and DTensor); this is "
                      f"torch {torch.__version__}. Upgrade torch.") from error

from fastcore_train.backends.torch.meta_init import InitWeights, check_init_weights, materialize, on_meta_device
from fastcore_train.backends.torch.parallel_driver import TorchDDPDriver
from fastcore_train.backends.torch.torch_fsdp_driver import STATE_DICT_TYPES, TorchFSDPDriver, TorchFSDPPersistence
from fastcore_train.drivers.model_parallel import check_options, data_shard, match_plan, mesh_shape
from fastcore_train.parallel.environment import RankFacts

Plan = Union[str, dict[str, Any], Callable[[torch.nn.Module, DeviceMesh], Any], None]

#: The plan's style names (ours and Hugging Face's ``tp_plan`` names) and the DTensor styles they stand for.
STYLES: dict[str, Callable[[], ParallelStyle]] = {
    "colwise": ColwiseParallel,
    "rowwise": RowwiseParallel,
    "sequence": SequenceParallel,
    "sequence_parallel": SequenceParallel,
    "colwise_rep": lambda: ColwiseParallel(output_layouts=Replicate()),
    "rowwise_rep": lambda: RowwiseParallel(input_layouts=Replicate()),
}
OPTIONS = ("tp_size", "tp_plan", "state_dict_type", "fully_shard_kwargs", "fsdp_layers", "init_weights")
LayerChoice = Union[list[str], tuple[str, ...], Callable[[str, torch.nn.Module], bool], None]


def chosen_layers(model: torch.nn.Module, choice: LayerChoice) -> list[torch.nn.Module]:
    """The submodules ``choice`` names: class names, or a predicate ``(name, module) -> bool``."""
    if choice is None:
        return []
    if callable(choice):
        return [module for name, module in model.named_modules() if name and choice(name, module)]
    if isinstance(choice, (list, tuple)) and all(isinstance(name, str) for name in choice):
        return [module for name, module in model.named_modules() if name and type(module).__name__ in choice]
    raise TypeError(f"fsdp_layers must be a list of class names or a function (name, module) -> bool, got {choice!r}.")


def hf_tp_plan(model: torch.nn.Module) -> Optional[dict[str, str]]:
    """A Hugging Face model's tensor-parallel plan (``model._tp_plan``, else its config's
    ``base_model_tp_plan`` under the base model's prefix), None when it has none."""
    plan = getattr(model, "_tp_plan", None) or getattr(model, "tp_plan", None)
    if isinstance(plan, dict) and plan:
        return dict(plan)
    base = getattr(getattr(model, "config", None), "base_model_tp_plan", None)
    if isinstance(base, dict) and base:
        prefix = getattr(model, "base_model_prefix", "")
        inner = prefix and prefix != "" and hasattr(model, prefix)
        return {(f"{prefix}.{name}" if inner else name): style for name, style in base.items()}
    return None


def resolve_plan(model: torch.nn.Module, plan: Plan) -> dict[str, ParallelStyle]:
    """``parallelize_module``'s plan from ``tp_plan``: module names (``*`` matches one name part)
    mapped to a style name or a ``ParallelStyle``; ``"auto"`` (or None): the model's HF ``tp_plan``."""
    if plan is None or plan == "auto":
        found = hf_tp_plan(model)
        if found is None:
            raise ValueError(f"tp_plan='auto' takes the model's Hugging Face tp_plan, but {type(model).__name__} has "
                             "none; pass torch_model_parallel_kwargs={'tp_plan': {'<module name>': 'colwise' | "
                             "'rowwise' | 'sequence' | a ParallelStyle}} or a function (model, mesh).")
        plan = found
    if not isinstance(plan, dict):
        raise TypeError(f"tp_plan must be a dict of module names to styles, 'auto', or a function (model, mesh); "
                        f"got {type(plan).__name__}.")
    return match_plan((name for name, _ in model.named_modules()), plan, STYLES, type(model).__name__,
                      is_style=lambda style: isinstance(style, ParallelStyle),
                      style_hint=" or a DTensor ParallelStyle (torch.distributed.tensor.parallel)")


def _local(value: torch.Tensor) -> torch.Tensor:
    return value.full_tensor() if isinstance(value, DTensor) else value


class TorchModelParallelDriver(TorchFSDPDriver):
    """One rank of a tensor-parallel (and FSDP2 data-parallel) torch job.

    ``torch_model_parallel_kwargs``: ``tp_size`` (ranks per tensor-parallel group, dividing the
    world size; default all of them), ``tp_plan`` (module names -> ``"colwise"``, ``"rowwise"``,
    ``"sequence"`` or a DTensor ``ParallelStyle``; ``"auto"``: the model's Hugging Face ``tp_plan``;
    or a function ``(model, mesh)`` that parallelizes the model itself on the 2-D mesh, FSDP
    included), ``state_dict_type`` (``"sharded"``, the default, or ``"full"``),
    ``fully_shard_kwargs`` (for ``fully_shard``: ``mp_policy``, ``reshard_after_forward``...) and
    ``fsdp_layers`` (class names, or a predicate ``(name, module)``: layers that FSDP2 shards as
    units of their own, so that only one is gathered at a time; the rest is one unit) and
    ``init_weights`` (for a model built under ``torch.device("meta")``: a weights file each rank
    reads only its shards from, or a function ``(model)`` initialising the sharded model; no rank
    then holds the whole model, see :mod:`~fastcore_train.backends.torch.meta_init`).
    """

    wrapper_name = "fully_shard"

    def __init__(self, model: torch.nn.Module, device: Any, world: RankFacts, fp16: bool = False,
                 torch_model_parallel_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
        options = check_options("torch_model_parallel_kwargs", torch_model_parallel_kwargs, OPTIONS)
        self.dp_size, self.tp_size = mesh_shape(world.world_size, options.get("tp_size", world.world_size))
        self.tp_plan: Plan = options.get("tp_plan", "auto")
        self._fully_shard_kwargs = dict(options.get("fully_shard_kwargs") or {})
        self._fsdp_layers: LayerChoice = options.get("fsdp_layers")
        chosen_layers(model, self._fsdp_layers)  # a malformed choice is an error before any process starts
        if "mesh" in self._fully_shard_kwargs:
            raise ValueError("fully_shard_kwargs must not set mesh: the driver shards over the mesh's dp dimension.")
        if self.tp_size > 1 and not callable(self.tp_plan):
            resolve_plan(model, self.tp_plan)  # a wrong plan is an error before any process starts
        self._init_weights: InitWeights = options.get("init_weights")
        check_init_weights(model, self._init_weights)
        TorchDDPDriver.__init__(self, model, device, world, fp16=fp16, **kwargs)
        self.state_dict_type = options.get("state_dict_type", "sharded")
        if self.state_dict_type not in STATE_DICT_TYPES:
            raise ValueError(f"torch_model_parallel_kwargs['state_dict_type'] must be one of {STATE_DICT_TYPES}, "
                             f"got {self.state_dict_type!r}.")
        self.mesh: Optional[DeviceMesh] = None
        self.io = TorchModelParallelPersistence(self)

    # ------------------------------------------------------------------ data
    def data_shard(self) -> tuple[int, int]:
        """``(dp_size, dp_rank)``: the ranks of a tensor-parallel group read the same batches."""
        return data_shard(self.comm.rank, self.tp_size, self.dp_size)

    # ------------------------------------------------------------------ set-up
    def _place_model(self) -> None:
        """A model on the meta device stays there until it is split (:meth:`wrap_model`)."""
        self._on_meta = on_meta_device(self._user_module)
        if not self._on_meta:
            super()._place_model()

    def wrap_model(self, dispatch: torch.nn.Module) -> torch.nn.Module:
        """Split the user's model over the mesh's ``tp`` dimension, then ``fully_shard`` over ``dp``;
        a model built on the meta device then gets this rank's shards (``init_weights``)."""
        if not self._on_meta:  # every rank starts from rank 0's weights, as DDP does
            for tensor in dispatch.state_dict().values():
                dist.broadcast(tensor, src=0)
        names = self._optimized_parameter_names()
        self.mesh = init_device_mesh(self._device.type, (self.dp_size, self.tp_size), mesh_dim_names=("dp", "tp"))
        if callable(self.tp_plan):
            self.tp_plan(self._user_module, self.mesh)
        else:
            if self.tp_size > 1:
                parallelize_module(self._user_module, self.mesh["tp"], resolve_plan(self._user_module, self.tp_plan))
            if self.dp_size > 1:  # each chosen layer its own unit (gathered only while it runs), then the rest
                for layer in chosen_layers(self._user_module, self._fsdp_layers):
                    fully_shard(layer, mesh=self.mesh["dp"], **self._fully_shard_kwargs)
                fully_shard(dispatch, mesh=self.mesh["dp"], **self._fully_shard_kwargs)
        if self._on_meta or self._init_weights is not None:
            materialize(self._user_module, self._device, self._init_weights, allocate=self._on_meta)
        self._point_optimizers_at(names)
        self._check_optimizers(dispatch)
        return dispatch

    def _optimized_parameter_names(self) -> list[list[str]]:
        """Each optimizer's parameters by name (tensor parallel and FSDP2 replace the Parameter objects)."""
        names = {id(parameter): name for name, parameter in self._user_module.named_parameters()}
        found = []
        for optimizer in self.optimizers:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            if any(id(p) not in names for p in params):
                raise ValueError(
                    f"The {type(optimizer).__name__} optimizer holds parameters that are not the model's; build "
                    "it from the model passed to the Trainer (e.g. torch.optim.SGD(model.parameters(), ...)).")
            found.append([names[id(p)] for p in params])
        return found

    def _point_optimizers_at(self, names: list[list[str]]) -> None:
        """Put the split parameters, by name, in place of the originals in the user's optimizers
        (the same optimizer objects: LR schedulers built on them keep working)."""
        current = dict(self._user_module.named_parameters())
        for optimizer, optimizer_names in zip(self.optimizers, names):
            remaining = iter(optimizer_names)
            for group in optimizer.param_groups:
                group["params"] = [current[next(remaining)] for _ in group["params"]]

    def _fsdp_modules(self) -> list[FSDPModule]:
        return [module for module in self.model.modules() if isinstance(module, FSDPModule)]

    # ------------------------------------------------------------------ the training step
    def no_sync(self) -> ContextManager[Any]:
        """Accumulation micro-steps: FSDP2 keeps its gradients unreduced (tensor parallel needs no sync)."""
        return self._requires_gradient_sync(False)

    @contextlib.contextmanager
    def _requires_gradient_sync(self, sync: bool) -> Iterator[None]:
        modules = self._fsdp_modules()
        for module in modules:
            module.set_requires_gradient_sync(sync, recurse=False)
        try:
            yield
        finally:
            for module in modules:
                module.set_requires_gradient_sync(True, recurse=False)

    def _gradients(self) -> list[torch.Tensor]:
        return [p.grad for p in self._user_module.parameters() if p.grad is not None]

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        """The norm of all gradients, sharded or not (each DTensor's norm is combined across its
        mesh), then every rank scales its part alike (collective)."""
        self.precision.unscale_gradients(self._stepping_optimizers())
        grads = self._gradients()
        if not grads:
            return torch.tensor(0.0, device=self._device)
        norms = torch.stack([_local(torch.linalg.vector_norm(grad, norm_type)).float() for grad in grads])
        total = torch.linalg.vector_norm(norms, norm_type)
        coefficient = float(torch.clamp(max_norm / (total + 1e-6), max=1.0))
        if coefficient < 1.0:
            for grad in grads:
                grad.mul_(coefficient)
        return total

    def clip_grad_value(self, clip_value: float) -> None:
        self.precision.unscale_gradients(self._stepping_optimizers())
        for grad in self._gradients():
            grad.clamp_(-clip_value, clip_value)

    # ------------------------------------------------------------------ evaluation
    @contextlib.contextmanager
    def full_params(self) -> Iterator[None]:
        """Inside it FSDP2's parameters stay gathered (tensor-parallel ones stay split: their layers
        compute with them as they are), so ranks may run different numbers of forward calls (collective)."""
        modules = self._fsdp_modules()
        keep = self._fully_shard_kwargs.get("reshard_after_forward", True)
        for module in modules:
            module.set_reshard_after_forward(False, recurse=False)
            module.unshard()
        try:
            yield
        finally:
            for module in modules:
                module.reshard()
                module.set_reshard_after_forward(keep, recurse=False)


class TorchModelParallelPersistence(TorchFSDPPersistence):
    """FSDP's checkpoints through ``torch.distributed.checkpoint``; the user's model keeps its
    modules (with DTensor parameters of their full shapes), so its layout is recorded and the
    converter reads the sharded folders (:mod:`fastcore_train.backends.torch.neutral_weights`)."""

    converter_reads_sharded_files = True


def create_driver(model: torch.nn.Module, device: Any, fp16: bool,
                  torch_model_parallel_kwargs: Optional[dict[str, Any]], output_from_new_proc: str,
                  **kwargs: Any) -> TorchModelParallelDriver:
    """A tensor-parallel driver for this rank: one device per rank (a device list, torchrun, or a process group)."""
    from fastcore_train.backends.torch import data_parallel_placement, with_launcher

    placement = data_parallel_placement("torch_model_parallel", model, device)
    driver = TorchModelParallelDriver(model, placement.device, placement.facts, fp16=fp16,
                                      torch_model_parallel_kwargs=torch_model_parallel_kwargs, **kwargs)
    return with_launcher(driver, placement, output_from_new_proc)
