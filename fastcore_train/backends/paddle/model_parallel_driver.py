"""``PaddleModelParallelDriver`` (``driver="paddle_model_parallel"``): tensor parallel on a
``(dp, tp)`` mesh with paddle's auto-parallel API, which runs on CPU (gloo) as on GPUs.

The ranks form a ``dist.ProcessMesh`` of shape ``(dp, tp)`` (``dp_size = world_size / tp_size``;
the ranks of one tensor-parallel group are consecutive). ``dist.shard_layer`` splits the layers
the plan names across ``tp``: their parameters become distributed tensors (``"colwise"``: a
``Linear`` weight ``[in, out]`` split on ``out`` and its bias with it; ``"rowwise"``: the weight
split on ``in``, the bias replicated); everything else is replicated. The user's optimizers step
the distributed parameters as they are (their accumulators are split like the parameters).
``dist.shard_optimizer`` is not used: paddle 3.3 refuses any optimizer but SGD and AdamW there.

Each batch is made a distributed tensor split over ``dp`` (``dtensor_from_local``), so that
gradients are averaged across the data-parallel ranks; a tensor-parallel group reads the same
batches (:meth:`data_shard`). The step's outputs are gathered (``dist.reshard`` to ``Replicate``):
every rank sees the whole loss. Evaluation and prediction run the whole dataloader on every rank,
their outputs made plain tensors.

Checkpoints are ordinary paddle checkpoints: saving gathers every parameter and optimizer
accumulator (``reshard`` to ``Replicate``, collective) and rank 0 writes them with ``paddle.save``,
so a checkpoint resumes on one process with ``driver="paddle"``, on any mesh, and converts with
``convert_checkpoint``. Loading splits the full values again.
"""
from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Optional, Union

import paddle
import paddle.distributed as dist
from paddle.distributed.auto_parallel.api import dtensor_from_local

from fastcore_train.backends.paddle.parallel_driver import PaddleFleetDriver
from fastcore_train.backends.paddle.persistence import (PaddlePersistence, load_file, load_model_file,
                                                        load_optimizer_state, save_optimizer_state)
from fastcore_train.drivers.model_calls import CallFn, resolve_method
from fastcore_train.drivers.model_parallel import check_options, data_shard, match_plan, mesh_shape, modules_of
from fastcore_train.parallel.environment import RankFacts
from fastcore_train.utils.nested import map_tensors

Plan = Union[dict[str, str], Callable[[paddle.nn.Layer, dist.ProcessMesh], Any]]
OPTIONS = ("tp_size", "tp_plan")
#: The plan's style names and the tp-dimension placements they give a layer's ``weight`` and ``bias``
#: (paddle's ``Linear`` weight is ``[in, out]``: column-wise splits dimension 1).
STYLES: dict[str, Callable[[], dict[str, Any]]] = {
    "colwise": lambda: {"weight": dist.Shard(1), "bias": dist.Shard(0)},
    "rowwise": lambda: {"weight": dist.Shard(0), "bias": dist.Replicate()},
}


def resolve_plan(model: paddle.nn.Layer, plan: Any) -> dict[str, dict[str, Any]]:
    """Each layer the plan names (``*`` wildcards) with the placements of its weight and bias."""
    if not isinstance(plan, dict):
        raise TypeError(f"tp_plan must be a dict of layer names to 'colwise' or 'rowwise', or a function "
                        f"(model, mesh) that shards the model itself; got {type(plan).__name__}.")
    names = [name for name, _ in model.named_sublayers()]
    styles = match_plan(names, plan, STYLES, type(model).__name__,
                        style_hint=" (paddle's auto-parallel placements of a layer's weight and bias), or pass a "
                        "function (model, mesh) as tp_plan")
    layers = dict(model.named_sublayers())
    chosen = modules_of(names, styles)
    for name in chosen:
        weight = getattr(layers[name], "weight", None)
        if weight is None or len(weight.shape) != 2:
            raise ValueError(f"tp_plan splits {name!r} ({type(layers[name]).__name__}), which has no 2-D weight; "
                             "name Linear (or Embedding) layers, or pass a function (model, mesh) as tp_plan.")
    return chosen


def _full(value: Any) -> Any:
    """A distributed tensor gathered into a plain tensor (collective); any other value as it is."""
    if isinstance(value, paddle.Tensor) and value.is_dist():
        replicated = [dist.Replicate() for _ in value.process_mesh.shape]
        return dist.reshard(value, value.process_mesh, replicated)._local_value()
    return value


def assign_full(tensor: Any, value: Any) -> None:
    """Put the full ``value`` into ``tensor``: this rank's part of it when ``tensor`` is distributed."""
    if tensor.is_dist():
        value = value if isinstance(value, paddle.Tensor) else paddle.to_tensor(value)
        part = dist.shard_tensor(value.astype(tensor.dtype), tensor.process_mesh, tensor.placements)
        tensor._local_value().set_value(part._local_value())
    else:
        tensor.set_value(value)


def _auto_parallel_grad_scaler(**gradscaler_kwargs: Any) -> Any:
    """paddle's GradScaler in auto-parallel's distributed view (``dist.shard_scaler``; GPU only:
    paddle's amp does nothing on CPU)."""
    return dist.shard_scaler(paddle.amp.GradScaler(**gradscaler_kwargs))


class PaddleModelParallelDriver(PaddleFleetDriver):
    """One rank of a tensor-parallel (and data-parallel) paddle job on a ``(dp, tp)`` ProcessMesh.

    ``paddle_model_parallel_kwargs``: ``tp_size`` (ranks per tensor-parallel group, dividing the
    world size; default all of them) and ``tp_plan`` (layer names, ``*`` matching any part of a
    name, -> ``"colwise"`` or ``"rowwise"``; or a function ``(model, mesh)`` that shards the model
    itself with ``dist.shard_layer`` / ``dist.shard_tensor`` on the 2-D mesh, dims ``"dp"``, ``"tp"``).
    """

    wrapper_name = "paddle auto-parallel"
    grad_scaler_type = staticmethod(_auto_parallel_grad_scaler)

    def __init__(self, model: paddle.nn.Layer, device: Any, world: RankFacts, fp16: bool = False,
                 paddle_model_parallel_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
        options = check_options("paddle_model_parallel_kwargs", paddle_model_parallel_kwargs, OPTIONS)
        self.dp_size, self.tp_size = mesh_shape(world.world_size, options.get("tp_size", world.world_size))
        if "tp_plan" not in options:
            raise ValueError("paddle_model_parallel_kwargs needs tp_plan: {'<layer name>': 'colwise' | 'rowwise'} "
                             "or a function (model, mesh) (paddle models carry no tensor-parallel plan).")
        self.tp_plan: Plan = options["tp_plan"]
        if not callable(self.tp_plan):
            resolve_plan(model, self.tp_plan)  # a wrong plan is an error before any process starts
        if isinstance(model, paddle.DataParallel):
            raise ValueError("driver='paddle_model_parallel' shards the model itself; pass the model unwrapped "
                             "(not in paddle.DataParallel).")
        super().__init__(model, device, world, fp16=fp16, **kwargs)
        self.mesh: Optional[dist.ProcessMesh] = None
        self.io = PaddleModelParallelPersistence(self)

    # ------------------------------------------------------------------ data
    def data_shard(self) -> tuple[int, int]:
        """``(dp_size, dp_rank)``: the ranks of a tensor-parallel group read the same batches."""
        return data_shard(self.comm.rank, self.tp_size, self.dp_size)

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        """Join the ranks, start every rank from rank 0's weights, and split the plan's layers over ``tp``."""
        self._join_ranks()
        model = self._user_module
        model.to(device=self._device)
        for tensor in model.state_dict().values():  # every rank starts from rank 0's weights, as DDP does
            dist.broadcast(tensor, src=0)
        ranks = list(range(self.comm.world_size))
        self.mesh = dist.ProcessMesh([ranks[i:i + self.tp_size] for i in range(0, len(ranks), self.tp_size)],
                                     dim_names=["dp", "tp"])
        names = self._optimized_parameter_names()
        if callable(self.tp_plan):
            self.tp_plan(model, self.mesh)
        else:
            chosen = resolve_plan(model, self.tp_plan)

            def shard(name: str, layer: paddle.nn.Layer, mesh: dist.ProcessMesh) -> None:
                for attribute, placement in chosen.get(name, {}).items():
                    parameter = getattr(layer, attribute, None)
                    if parameter is not None:
                        setattr(layer, attribute, dist.shard_tensor(parameter, mesh, [dist.Replicate(), placement]))

            dist.shard_layer(model, self.mesh, shard)  # (the layers it is not told of are replicated)
        self._point_optimizers_at(names)
        self.model = model
        self.precision.setup()

    def _optimized_parameter_names(self) -> list[list[str]]:
        """Each optimizer's parameters by name (sharding replaces the parameter objects)."""
        names = {id(parameter): name for name, parameter in self._user_module.named_parameters()}
        found = []
        for optimizer in self.optimizers:
            params = list(optimizer._parameter_list or [])
            if any(id(p) not in names for p in params):
                raise ValueError(f"The {type(optimizer).__name__} optimizer holds parameters that are not the "
                                 "model's; build it from the model passed to the Trainer "
                                 "(e.g. paddle.optimizer.AdamW(parameters=model.parameters())).")
            found.append([names[id(p)] for p in params])
        return found

    def _point_optimizers_at(self, names: list[list[str]]) -> None:
        """Put the distributed parameters, by name, in place of the originals in the user's optimizers
        (the same optimizer objects: their LR schedulers keep working)."""
        current = dict(self._user_module.named_parameters())
        for optimizer, optimizer_names in zip(self.optimizers, names):
            by_id = {id(old): current[name] for old, name in zip(optimizer._parameter_list, optimizer_names)}
            optimizer._parameter_list = [by_id[id(p)] for p in optimizer._parameter_list]
            groups = list(optimizer._param_groups or [])
            if groups and isinstance(groups[0], dict):
                for group in groups:
                    group["params"] = [by_id[id(p)] for p in group["params"]]
            else:
                optimizer._param_groups = list(optimizer._parameter_list)

    # ------------------------------------------------------------------ the model's calls
    def get_model_call_fn(self, fn_name: str, for_training: bool = True) -> CallFn:
        """The model method (or forward), with paddle tensors in made distributed tensors (split
        over ``dp`` when training, replicated otherwise) and distributed outputs gathered."""
        target, signature = resolve_method(self._user_module, fn_name)
        method = self._user_module if target == "forward" else signature
        return functools.partial(self._call, method, for_training), signature

    def _call(self, method: Callable[..., Any], for_training: bool, *args: Any, **kwargs: Any) -> Any:
        split = dist.Shard(0) if for_training else dist.Replicate()

        def distribute(tensor: paddle.Tensor) -> paddle.Tensor:
            if tensor.is_dist() or self.mesh is None:
                return tensor
            return dtensor_from_local(tensor, self.mesh, [split, dist.Replicate()])

        args, kwargs = map_tensors((args, kwargs), paddle.Tensor, distribute)
        outputs = method(*args, **kwargs)
        if for_training:  # still distributed (the loss's backward runs through the gather)
            return map_tensors(outputs, paddle.Tensor, lambda value: dist.reshard(
                value, value.process_mesh, [dist.Replicate()] * len(value.process_mesh.shape))
                if value.is_dist() else value)
        return map_tensors(outputs, paddle.Tensor, _full)

    # ------------------------------------------------------------------ the training step
    def no_sync(self) -> ContextManager[Any]:
        """Accumulation micro-steps: gradients add up on each rank's part (auto-parallel reduces them itself)."""
        return contextlib.nullcontext()

    def _stepping_optimizers(self) -> list[Any]:
        return self.optimizers

    def _gradients(self) -> Iterator[Any]:
        return (p.grad for p in self._user_module.parameters() if p.grad is not None)

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> Any:
        """The norm of all gradients, each gathered whole (collective), then every rank scales its part alike."""
        self.precision.unscale_gradients(self._stepping_optimizers())
        grads = list(self._gradients())
        if not grads:
            return paddle.to_tensor(0.0)
        norms = paddle.stack([paddle.linalg.norm(_full(grad).astype("float32").flatten(), p=norm_type)
                              for grad in grads])
        total = paddle.linalg.norm(norms, p=norm_type)
        coefficient = min(1.0, float(max_norm / (float(total) + 1e-6)))
        if coefficient < 1.0:
            for grad in grads:
                local = grad._local_value() if grad.is_dist() else grad
                local.set_value(local * coefficient)
        return total

    def clip_grad_value(self, clip_value: float) -> None:
        self.precision.unscale_gradients(self._stepping_optimizers())
        for grad in self._gradients():
            local = grad._local_value() if grad.is_dist() else grad
            local.set_value(paddle.clip(local, -clip_value, clip_value))


class PaddleModelParallelPersistence(PaddlePersistence):
    """Plain paddle checkpoints: every rank helps gather the split tensors, rank 0 writes them."""

    collective_save = True
    #: The files are ordinary paddle state dicts, so the checkpoint records the layout the converter reads.
    converter_reads_sharded_files = True

    def model_state(self) -> dict[str, Any]:
        return {name: _full(value) for name, value in self.driver.unwrap_model().state_dict().items()}

    def save_model(self, path: Any, only_state_dict: bool = True, **kwargs: Any) -> None:
        if not only_state_dict:
            raise ValueError("driver='paddle_model_parallel' saves state dicts only (a paddle.jit.save export "
                             "of a split model is not supported); pass only_state_dict=True.")
        state = self.model_state()
        if self.driver.comm.rank == 0:
            paddle.save(state, str(path), **kwargs)

    def load_model(self, path: Any, only_state_dict: bool = True, **kwargs: Any) -> None:
        load_model_file(self.driver.unwrap_model(), Path(path), assign=assign_full, **kwargs)

    def training_state_object(self) -> dict[str, Any]:
        states = []
        for optimizer in self.driver.optimizers:
            state = save_optimizer_state(optimizer)
            state["accumulators"] = {kind: {index: _full(value) for index, value in values.items()}
                                     for kind, values in state["accumulators"].items()}
            state["master_weights"] = {index: _full(value) for index, value in state["master_weights"].items()}
            states.append(state)
        return self.training_state(states)

    def save_training_state(self, path: Any) -> None:
        state = self.training_state_object()
        if self.driver.comm.rank == 0:
            self.write_object(state, path)

    def load_training_state(self, path: Any) -> None:
        self.restore_training_state(load_file(path), functools.partial(load_optimizer_state, assign=assign_full))
