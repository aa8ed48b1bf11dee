"""What the pool asks of each framework inside a rank: its process groups, and how a rank warms up."""
from __future__ import annotations

import contextlib
import sys
import tempfile
from typing import ContextManager, Optional

# Where each launcher puts the rank (torchrun and oneflow's RANK, paddle's, mpirun's).
RANK_VARIABLES = ("RANK", "PADDLE_TRAINER_ID", "OMPI_COMM_WORLD_RANK")


def process_groups(backend: Optional[str]) -> list[str]:
    """The process groups the framework holds in this process, by name (none before it is imported).

    jittor (MPI) and oneflow set up their one world when imported under a launcher and have no API to
    make another, so they report none.
    """
    if backend == "torch" and "torch.distributed" in sys.modules:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            return []
        names = dist.distributed_c10d._world.pg_names  # ProcessGroup -> name; no public listing
        return sorted(f"{name!r} of ranks {dist.get_process_group_ranks(group)}" for group, name in names.items())
    if backend == "paddle" and "paddle.distributed" in sys.modules:
        from paddle.distributed import collective

        groups = collective._get_group_map()  # gid -> Group; no public listing
        return sorted(f"{gid} of ranks {list(group.ranks)}" for gid, group in groups.items())
    return []


def body_context(backend: Optional[str]) -> ContextManager[None]:
    """What makes a body start as in a fresh process where the framework keeps process-wide counters:
    paddle names every parameter from one (``linear_0.w_0``, ``linear_1.w_0``, ...) and writes those names
    into its checkpoint files; each body gets its own, from 0."""
    if backend == "paddle" and "paddle" in sys.modules:
        from paddle.utils import unique_name

        return unique_name.guard()
    return contextlib.nullcontext()


def settle(backend: Optional[str]) -> None:
    """Let go of what the framework keeps of a finished body until the next one replaces it, as it does at
    exit: paddle holds the last single-process DataLoader iterator in a module global, whose reader thread
    waits for good when an epoch was cut short (its exit hook, ``_clear_loader``, shuts it down so; that
    hook deletes the global's name, so it is not called twice here)."""
    if backend == "paddle" and "paddle.io" in sys.modules:
        from paddle.io.dataloader import dataloader_iter

        last = getattr(dataloader_iter, "_loader", None)
        if last is not None:
            last._try_shutdown_all()
            dataloader_iter._loader = None


def warm_up(backend: str, world_size: int) -> None:
    """Train the conformance model for one epoch as a pool body would: the driver joins the ranks
    (the process group every later body shares) and every lazy import and first-use cost is paid."""
    from tests.distributed.jobs.train_job import main

    with tempfile.TemporaryDirectory(prefix="rankpool-warm-up-") as out:
        main({"backend": backend, "out": out, "device": None if world_size > 1 else "cpu",
              "world_size": world_size, "n_epochs": 1, "evaluate": 10})
