"""``PaddleFleetDriver``: collective data parallel with paddle Fleet (gloo on CPU, nccl on GPU).

``fleet.init(is_collective=True)`` sets up the ranks, ``fleet.distributed_model`` wraps the model
in ``paddle.DataParallel`` (its backward averages gradients across ranks) and
``fleet.distributed_optimizer`` wraps each optimizer. Started three ways with the same script:
self-launched from ``python train.py`` with a device list (this process becomes rank 0 and starts
the others with paddle's launcher variables), under ``python -m paddle.distributed.launch``, or
inside a parallel environment the user initialised.
"""
from __future__ import annotations

import os
from typing import Any, ContextManager, Optional

import paddle
import paddle.distributed as dist
from paddle.distributed import fleet

from fastcore_train.backends.paddle.devices import is_gpu
from fastcore_train.backends.paddle.single_driver import PaddleSingleDriver, _PADDLE_KWARGS
from fastcore_train.backends.paddle.world import explain_gloo_start_failure
from fastcore_train.drivers.backend_options import check_backend_options
from fastcore_train.drivers.collectives import ObjectCollectives
from fastcore_train.drivers.model_calls import DataParallelCalls, method_dispatch_class
from fastcore_train.parallel.environment import RankFacts
from fastcore_train.parallel.loopback import choose_interfaces_from_environment
from fastcore_train.parallel.reach import joined_within, too_few_joined, wait_for_master
from fastcore_train.parallel.watchdog import framework_timeout


#: The variables paddle's transports read to choose the interface they bind to.
INTERFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def keep_transports_on_loopback(world_size: int) -> dict[str, str]:
    """Before ``fleet.init``: gloo/NCCL bind to the loopback interface when every rank is on this machine (a
    loopback ``PADDLE_MASTER``, or paddle's launcher says all ranks are local), else to the interface of
    the route toward the master, unless the user set their variables (issue 39). Paddle's TCP store itself listens on every interface whatever is set
    (docs/security.md)."""
    return choose_interfaces_from_environment(INTERFACE_VARIABLES, world_size, "PADDLE_MASTER", "PADDLE_LOCAL_SIZE")


def _fleet_grad_scaler(**gradscaler_kwargs: Any) -> Any:
    """paddle's GradScaler wrapped by Fleet for data parallel training."""
    return fleet.distributed_scaler(paddle.amp.GradScaler(**gradscaler_kwargs))


def _reach_the_master(rank: int, timeout: float) -> None:
    """Before ``fleet.init``, a rank other than 0 reaches rank 0's store (``PADDLE_MASTER``) or says clearly
    why not within ``timeout`` (paddle's own client would wait in silence; issue 39)."""
    host, _, port = os.environ.get("PADDLE_MASTER", "").rpartition(":")
    if rank != 0 and host and port.isdigit():
        wait_for_master(host, int(port), rank, timeout)


def _not_joined(rank: int, world_size: int, timeout: float) -> str:
    """What a rank says when ``fleet.init`` has not returned within ``timeout``: the job's ranks never met."""
    host, _, port = os.environ.get("PADDLE_MASTER", "?:0").rpartition(":")
    if rank == 0:
        return too_few_joined(host, int(port), world_size, timeout, "paddle's fleet.init did not return")
    return (f"rank {rank} reached the job's master at {host}:{port}, but the job's {world_size} ranks did not all "
            f"meet within {timeout:.0f} s (paddle's fleet.init did not return). Check that every node was started, "
            f"with the same master and a world size that counts every rank. collective_timeout sets how long.")


def _fleet_initialised() -> bool:
    """Whether ``fleet.init`` ran in this process (``fleet.init`` is bound to fleet's singleton)."""
    return getattr(fleet.init.__self__, "_role_maker", None) is not None


_MethodDispatch = method_dispatch_class(paddle.nn.Layer, __name__)


class PaddleFleetDriver(DataParallelCalls, PaddleSingleDriver):
    """One rank of a Fleet data-parallel job; ``world`` says which. A self-launched job's other
    ranks are started by the driver's launcher before :meth:`setup`.

    ``paddle_kwargs`` adds ``fleet_strategy`` (a ``fleet.DistributedStrategy``, e.g. with
    ``find_unused_parameters=True``) to the single-process ones.
    """

    grad_scaler_type = staticmethod(_fleet_grad_scaler)
    wrapper_name = "paddle.DataParallel"

    def __init__(self, model: paddle.nn.Layer, device: Any, world: RankFacts, fp16: bool = False,
                 paddle_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
        paddle_kwargs = check_backend_options("paddle_kwargs", paddle_kwargs, _PADDLE_KWARGS | {"fleet_strategy"})
        self._strategy = paddle_kwargs.pop("fleet_strategy", None)
        super().__init__(model, device=device, fp16=fp16, paddle_kwargs=paddle_kwargs, **kwargs)
        self.comm = ObjectCollectives(world, dist, gather_appends=True,  # paddle's all_gather_object appends
                                      make_tensor=lambda values: paddle.to_tensor(values, dtype="int32"))
        self._user_wrapped = isinstance(model, paddle.DataParallel)
        self._user_module = model._layers if self._user_wrapped else model
        self._wrapped_optimizers: list[tuple[Any, Any]] = []  # (user's, fleet's wrapper)

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        self._join_ranks()
        self._user_module.to(device=self._device)
        if not self._user_wrapped:
            self.model = fleet.distributed_model(_MethodDispatch(self._user_module))
        self.precision.setup()

    def _join_ranks(self) -> None:
        """Make this rank's device current and join the job's process group (``fleet.init``), once."""
        if not is_gpu(self._device):
            # Ranks sharing a machine's cores: without this each would start one thread per core.
            ranks_here = int(os.environ.get("PADDLE_LOCAL_SIZE", self.comm.world_size))
            paddle.base.core.set_num_threads(max(1, (os.cpu_count() or 1) // ranks_here))
        paddle.set_device(self._device)
        if not _fleet_initialised():  # also after the user's init_parallel_env: fleet reuses it
            if not is_gpu(self._device) and not dist.is_initialized():
                os.environ["PADDLE_DISTRI_BACKEND"] = "gloo"  # CPU ranks, even under a GPU launcher
            # paddle's NCCL groups read their timeout (ms) from here; its gloo groups have none (our watchdog is it).
            os.environ.setdefault("PADDLE_PG_TIMEOUT", str(int(framework_timeout(self.comm.timeout) * 1000)))
            keep_transports_on_loopback(self.comm.world_size)
            _reach_the_master(self.comm.rank, self.comm.timeout)
            try:
                with joined_within(self.comm.timeout, _not_joined(self.comm.rank, self.comm.world_size,
                                                                  self.comm.timeout)):
                    fleet.init(is_collective=True, strategy=self._strategy)
            except RuntimeError as error:
                clearer = explain_gloo_start_failure(error, self.comm.world_size)
                if clearer is error:
                    raise
                raise clearer from error

    # ------------------------------------------------------------------ forward / backward
    def no_sync(self) -> ContextManager[Any]:
        return self.model.no_sync()

    def _fleet_optimizers(self) -> list[Any]:
        """``fleet.distributed_optimizer`` around each of ``self.optimizers`` (built once per optimizer)."""
        if [user for user, _ in self._wrapped_optimizers] != self.optimizers:
            self._wrapped_optimizers = [(optimizer, fleet.distributed_optimizer(optimizer))
                                        for optimizer in self.optimizers]
        return [wrapped for _, wrapped in self._wrapped_optimizers]

    def _stepping_optimizers(self) -> list[Any]:
        """Fleet's wrappers: the scaler must unscale the very objects :meth:`step` steps. The
        gradients were averaged across ranks in the backward (DataParallel's reducer), so
        clipping after it acts alike on every rank."""
        return self._fleet_optimizers()
