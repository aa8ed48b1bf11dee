"""``JittorMPIDriver``: data parallel over MPI ranks, jittor's own way.

A jittor Dataset's ``batch_size`` keeps jittor's MPI meaning, the global batch: each rank trains
on ``batch_size / N`` samples of it, drawn by the Trainer's samplers. Under ``mpirun -np N python
train.py`` jittor knows its rank (``jt.rank``, ``jt.world_size``) and
its optimizers average gradients across ranks inside ``backward`` (and broadcast rank 0's
parameters on the first step), so a rank trains like one process on its share of every global
batch. From a plain ``python train.py`` with a device list, the driver's launcher
(:class:`~fastcore_train.parallel.launcher.MpirunReexec`, run inside ``Trainer.__init__`` before
set-up) replaces the process with ``mpirun`` running the same command line.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

import jittor as jt
from jittor.dataset import Dataset

from fastcore_train.backends.jittor.dataloader import JittorData
from fastcore_train.backends.jittor.single_driver import JittorSingleDriver
from fastcore_train.backends.jittor.world import JittorCollectives
from fastcore_train.log import logger
from fastcore_train.samplers.adapt import BatchedIndices
from fastcore_train.parallel.launch import check_output_choice, redirect_own_output
from fastcore_train.parallel.environment import LAUNCHED_RANK_ENV


class JittorMPIDriver(JittorSingleDriver):
    """One MPI rank of a data-parallel job; ``launch_world_size`` (set when not yet under MPI) is
    the number of ranks to start with mpirun."""

    def __init__(self, model: jt.Module, device: Any = "cpu", fp16: bool = False,
                 jittor_kwargs: Optional[dict[str, Any]] = None, launch_world_size: Optional[int] = None,
                 **kwargs: Any) -> None:
        self.output_from_new_proc = check_output_choice(kwargs.pop("output_from_new_proc", "only_error"))
        super().__init__(model, device=device, fp16=fp16, jittor_kwargs=jittor_kwargs, **kwargs)
        self.comm = JittorCollectives(launch_world_size)
        self.data = JittorMPIData(self._device, self.comm)
        if jt.in_mpi and os.environ.get(LAUNCHED_RANK_ENV) == "mpi":
            # We re-ran the script under mpirun: its worker ranks follow output_from_new_proc as the
            # workers other backends spawn do. Under a user's own mpirun, output is left to mpirun.
            redirect_own_output(self.output_from_new_proc, self.comm.rank)

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        super().setup()
        # Same starting weights everywhere, whatever each rank initialised.
        for parameter in self.unwrap_model().parameters():
            parameter.assign(parameter.mpi_broadcast(0))
        jt.sync_all()


class JittorMPIData(JittorData):
    """``driver.data`` of an MPI rank: a jittor Dataset's ``batch_size`` is read as the global batch."""

    def __init__(self, device: Any, comm: JittorCollectives) -> None:
        super().__init__(device)
        self.comm = comm

    def dataloader_args(self, dataloader: Any) -> Any:
        """As in one process, except that a jittor Dataset's ``batch_size`` is the global batch (jittor's
        meaning under MPI): each rank's share is ``ceil(batch_size / world_size)``."""
        args = super().dataloader_args(dataloader)
        if args is None or not isinstance(dataloader, Dataset):
            return args
        per_rank = -(-args.batch_size // self.comm.world_size)
        if per_rank * self.comm.world_size != args.batch_size and self.comm.is_global_zero():
            logger.warning("batch_size=%d is not divisible by the %d MPI ranks: each rank takes %d samples per "
                           "batch, so training on it differs from one process with batch_size=%d.",
                           args.batch_size, self.comm.world_size, per_rank, args.batch_size)
        return dataclasses.replace(args, batch_size=per_rank,
                                   batch_sampler=BatchedIndices(args.sampler, per_rank, args.drop_last))
