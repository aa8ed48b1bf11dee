"""``OneflowDDPDriver``: data parallel with ``oneflow.nn.parallel.DistributedDataParallel``.

Started two ways with the same script:

- under ``python -m oneflow.distributed.launch --nproc_per_node N train.py`` (rank facts from its
  environment);
- self-launched from a plain ``python train.py`` with a device list. ``import oneflow`` fixes the
  process's rank and world size when it is first imported and offers no way to change them, so
  this process cannot become rank 0: it starts *every* rank (0..N-1) as a new process running
  the same command line, waits for them and exits with their status (it never returns from
  ``Trainer(...)``). Code before the Trainer therefore runs N+1 times, and anything after
  ``trainer.run()`` runs in the ranks only.

OneFlow's ``DistributedDataParallel`` adds hooks to the module (it returns the module itself):
each parameter's gradient is scaled by 1/N and all-reduced once its bucket is ready, and the
hooks' bookkeeping is reset by a forward hook. The driver wraps the user's model in a module whose
forward dispatches to any method (``train_step``...), so every training call passes that hook.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, ContextManager, Iterator, Optional

import oneflow as flow
from oneflow.nn.parallel import DistributedDataParallel

from fastcore_train.backends.oneflow.single_driver import OneflowSingleDriver
from fastcore_train.backends.oneflow.world import OneflowCollectives, choose_transport_interface
from fastcore_train.drivers.model_calls import DataParallelCalls, method_dispatch_class
from fastcore_train.log import logger
from fastcore_train.parallel.environment import RankFacts


_MethodDispatch = method_dispatch_class(flow.nn.Module, __name__)


class OneflowDDPDriver(DataParallelCalls, OneflowSingleDriver):
    """One rank of a oneflow DDP job. In a self-launched job, the plain process holding this driver
    only supervises: its launcher (:class:`~fastcore_train.parallel.launcher.SpawnAllRanks`) starts
    every rank before :meth:`setup` and never returns."""

    wrapper_name = "oneflow DistributedDataParallel"

    def __init__(self, model: flow.nn.Module, device: Any, world: RankFacts, fp16: bool = False,
                 oneflow_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
        oneflow_kwargs = dict(oneflow_kwargs or {})
        self._ddp_kwargs = oneflow_kwargs.pop("ddp_kwargs", {})
        super().__init__(model, device=device, fp16=fp16, oneflow_kwargs=oneflow_kwargs, **kwargs)
        self.comm = OneflowCollectives(world, self._device)
        self._user_wrapped = bool(getattr(model, "_is_ddp_module", False))
        self._skip_sync = False

    @property
    def _user_module(self) -> flow.nn.Module:
        return self.model.model if isinstance(self.model, _MethodDispatch) else self.model

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        if flow.env.get_world_size() != self.comm.world_size:
            raise RuntimeError(
                f"oneflow was imported with world size {flow.env.get_world_size()}, but this rank belongs to a job "
                f"of {self.comm.world_size}; oneflow reads RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT when first "
                "imported, so set them before importing it (python -m oneflow.distributed.launch does).")
        if self._device.type == "cpu":
            # Ranks sharing a machine's cores: without this each would start one thread per core.
            ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", self.comm.world_size))
            flow.set_num_threads(max(1, (os.cpu_count() or 1) // ranks_here))
        choose_transport_interface(self.comm.world_size)  # before DDP's first broadcast starts NCCL
        if self._user_wrapped:
            # Already wrapped: oneflow's DDP registered its all-reduce hooks on these very parameter
            # tensors, which moving the module would replace; the user placed it before wrapping.
            self._check_user_ddp_device()
        else:
            self._user_module.to(self._device)
            try:
                self.model = DistributedDataParallel(_MethodDispatch(self._user_module), **self._ddp_kwargs)
            except RuntimeError as error:
                raise _explain_thread_scope(error) from error
            self.model.register_forward_hook(self._after_ddp_forward)
        self.precision.setup()
        self._reseeder = None
        self.reseeder()  # from the seed and the generators the model has now

    def _check_user_ddp_device(self) -> None:
        devices = {parameter.device.type for parameter in self._user_module.parameters()}
        if devices and devices != {self._device.type}:
            raise ValueError(f"The DistributedDataParallel model you passed has parameters on {sorted(devices)}, but "
                             f"this rank's device is {self._device}; move the model to the device before wrapping it.")

    # ------------------------------------------------------------------ forward
    def _after_ddp_forward(self, module: Any, inputs: Any, output: Any) -> None:
        """Runs after DDP's own forward hook: inside ``no_sync``, mark every gradient bucket as
        already reduced so that the backward all-reduces nothing."""
        if self._skip_sync:
            for state in module._ddp_state_for_reversed_params.values():
                state[1] = True

    @contextlib.contextmanager
    def _no_sync(self) -> Iterator[None]:
        self._skip_sync = True
        try:
            yield
        finally:
            self._skip_sync = False
        # DDP's hooks scale every gradient by 1/N even when nothing is reduced: undo that, so the
        # next synchronised backward averages the accumulated local gradients exactly once.
        with flow.no_grad():
            for parameter in self._user_module.parameters():
                if parameter.grad is not None:
                    parameter.grad.mul_(float(self.comm.world_size))

    def no_sync(self) -> ContextManager[Any]:
        """Skip the gradient all-reduce (accumulation micro-steps); oneflow 0.9 has no ``no_sync``."""
        if self._user_wrapped:
            logger.warning("no_sync is not available for a model you passed through DistributedDataParallel "
                           "yourself; every accumulation step all-reduces.")
            return contextlib.nullcontext()
        return self._no_sync()


# What oneflow 0.9 raises when a thread other than the one that imported it runs a collective.
_NO_THREAD_SCOPE = "scope != nullptr"


def _explain_thread_scope(error: RuntimeError) -> BaseException:
    """A clearer error for oneflow's ``Check failed: scope != nullptr``: oneflow keeps its scope per
    thread, set up in the thread that imported it. Any other error is returned as it is."""
    if _NO_THREAD_SCOPE not in str(error):
        return error
    return RuntimeError(
        f"oneflow failed in this thread ({error}): it was imported in another thread, and oneflow 0.9 sets up its "
        "scope only in the thread that imports it. Ray Train runs the training function in a thread of its own "
        "after loading it (and the modules it refers to) in another: import oneflow inside the training function, "
        "not at the top of the script or module the function comes from (see docs/ray.md).")
