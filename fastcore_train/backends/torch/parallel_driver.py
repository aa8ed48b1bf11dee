"""``TorchDDPDriver``: data parallel with ``DistributedDataParallel`` (gloo on CPU, nccl on CUDA).

Started three ways with the same script: self-launched from ``python train.py`` with a device
list (this process becomes rank 0 and starts the others), under ``torchrun`` (rank facts from its
environment), or inside a process group the user initialised.
"""
from __future__ import annotations

import atexit
import os
import time
from datetime import timedelta
from typing import Any, ContextManager, Optional

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from fastcore_train.backends.torch.job_store import choose_transport_interfaces, job_store
from fastcore_train.backends.torch.single_driver import TorchSingleDriver
from fastcore_train.drivers.collectives import ObjectCollectives
from fastcore_train.drivers.model_calls import DataParallelCalls, method_dispatch_class
from fastcore_train.parallel.environment import RankFacts
from fastcore_train.parallel.watchdog import framework_timeout


def _end_process_group() -> None:
    """At exit, destroy the group we created, then let gloo's worker threads release their work."""
    if dist.is_initialized():
        dist.destroy_process_group()
    _let_gloo_threads_finish()


def _let_gloo_threads_finish() -> None:
    """At exit, give gloo's worker threads the GIL once more (also for a group the user created).

    Releasing a finished work drops its tensors, which needs the GIL; a gloo thread asking for it
    while the interpreter finalizes aborts the process ("terminate called without an active
    exception", exit -6) after training succeeded.
    """
    time.sleep(0.05)


_MethodDispatch = method_dispatch_class(torch.nn.Module, __name__)


class TorchDDPDriver(DataParallelCalls, TorchSingleDriver):
    """One rank of a DDP job; ``world`` says which (its ``comm``). A self-launched job's other ranks are started
    by the driver's launcher before :meth:`setup` (see :mod:`fastcore_train.parallel.launcher`)."""

    wrapper_name = "DistributedDataParallel"

    def __init__(self, model: torch.nn.Module, device: Any, world: RankFacts, fp16: bool = False,
                 torch_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
        torch_kwargs = dict(torch_kwargs or {})
        self._ddp_kwargs = torch_kwargs.pop("ddp_kwargs", {})
        self._backend = torch_kwargs.pop("backend", None)
        super().__init__(model, device=device, fp16=fp16, torch_kwargs=torch_kwargs, **kwargs)
        self.comm = ObjectCollectives(world, dist, make_tensor=self._int_tensor)
        self._user_wrapped = isinstance(model, DistributedDataParallel)
        self._user_module = model.module if self._user_wrapped else model

    def _int_tensor(self, values: list[int]) -> torch.Tensor:
        """Integers on this rank's device, for the process group's small all-reduces."""
        return torch.tensor(values, dtype=torch.int32, device=self._device)

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        if self._device.type == "cpu":
            # Ranks sharing a machine's cores: without this each would start one thread per core.
            usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            torch.set_num_threads(max(1, usable // int(os.environ.get("LOCAL_WORLD_SIZE", self.comm.world_size))))
        if not dist.is_initialized():
            backend = self._backend or ("nccl" if self._device.type == "cuda" else "gloo")
            if self._device.type == "cuda":
                torch.cuda.set_device(self._device)
            timeout = timedelta(seconds=framework_timeout(self.comm.timeout))
            # a job on this machine listens on loopback only, across machines on the master's link (issue 39;
            # docs/security.md); a master out of reach is a clear error within collective_timeout
            choose_transport_interfaces(self.comm.world_size)
            store = job_store(self.comm.rank, self.comm.world_size, self.comm.timeout, timeout)
            dist.init_process_group(backend=backend, rank=self.comm.rank, world_size=self.comm.world_size,
                                    timeout=timeout, **({"store": store} if store is not None else {}))
            atexit.register(_end_process_group)
        else:  # the user's group stays theirs to destroy
            atexit.register(_let_gloo_threads_finish)
        self._place_model()
        if not self._user_wrapped:
            self.model = self.wrap_model(_MethodDispatch(self._user_module))
        self.precision.setup()

    def _place_model(self) -> None:
        """Move the user's model onto this rank's device (before it is wrapped)."""
        self._user_module.to(self._device)

    def wrap_model(self, dispatch: torch.nn.Module) -> torch.nn.Module:
        """Wrap the method-dispatching module for data parallel; subclasses (FairScale, FSDP) override."""
        device_ids = [self._device.index] if self._device.type == "cuda" else None
        return DistributedDataParallel(dispatch, device_ids=device_ids, **self._ddp_kwargs)

    # ------------------------------------------------------------------ forward
    def no_sync(self) -> ContextManager[Any]:
        return self.model.no_sync()
