"""A driver's place in its job and the collectives the controller needs: ``driver.comm``.

:class:`Collectives` is one process's answer (rank 0 of 1, nothing to wait for). A data-parallel
driver holds a subclass for its framework: :class:`ObjectCollectives` for frameworks whose
distributed module has torch's object API (torch, paddle), or the backend's own (jittor's MPI,
oneflow's ``comm``), in ``backends/<name>/world.py``. Rank facts come from the launcher's
environment (:mod:`fastcore_train.parallel.environment`), read once.

``timeout`` is the job's collective timeout (the ``collective_timeout`` driver option): how long
a rank may wait for the others before the job ends naming the rank that did not arrive.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from fastcore_train.parallel.environment import SINGLE_PROCESS, RankFacts

#: Seconds a rank may go without progress in a data-parallel run before the job ends: 10 minutes (as
#: NCCL's default in torch). Long phases a rank cannot beat in (saving, loading) get 30 minutes
#: (:data:`fastcore_train.parallel.watchdog.BUSY_LIMIT`); see docs/reliability.md for the reason.
DEFAULT_COLLECTIVE_TIMEOUT = 600.0


def check_collective_timeout(value: Any) -> float:
    """``collective_timeout`` as seconds; anything but a positive number is a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise ValueError(f"collective_timeout must be a positive number of seconds (default "
                         f"{DEFAULT_COLLECTIVE_TIMEOUT:g}), got {value!r}.")
    return float(value)


class Collectives:
    """This rank's facts and its collectives over picklable objects; one process by default.

    ``distributed`` says whether the driver trains data-parallel (its samplers split data and its
    metrics aggregate); by default, whether the job has more than one rank.
    """

    def __init__(self, facts: RankFacts = SINGLE_PROCESS, distributed: Optional[bool] = None) -> None:
        self.facts = facts
        self._distributed = facts.world_size > 1 if distributed is None else distributed
        #: Seconds a rank may wait for the others (``collective_timeout``); see the module docstring.
        self.timeout = DEFAULT_COLLECTIVE_TIMEOUT
        #: While ``Trainer.run`` is watched: this rank's heartbeats (:mod:`fastcore_train.parallel.watchdog`),
        #: refreshed by each evaluation batch too.
        self.heartbeats: Optional[Any] = None

    @property
    def rank(self) -> int:
        """This process's global rank."""
        return self.facts.rank

    @property
    def world_size(self) -> int:
        """How many ranks the job has."""
        return self.facts.world_size

    @property
    def local_rank(self) -> int:
        """This process's rank on its machine."""
        return self.facts.local_rank

    def is_distributed(self) -> bool:
        return self._distributed

    def is_global_zero(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every rank; nothing to wait for in one process."""

    def settle(self) -> None:
        """Wait for this rank's own queued framework work, collectives included (not a collective: no other
        rank needs to call it). A no-op where collectives return only when done; oneflow's virtual machine
        runs them later, so a rank first waits for a lost peer wherever it next reads a tensor."""

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Rank ``src``'s ``obj`` on every rank."""
        return obj

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order."""
        return [obj]

    def sum_over_ranks(self, values: Sequence[int]) -> list[int]:
        """Each integer summed over every rank (the Trainer's collective stop decision). Backends
        replace this with one small all-reduce of their framework."""
        if not self.is_distributed() or self.world_size == 1:
            return [int(value) for value in values]
        gathered = self.all_gather_object([int(value) for value in values])
        return [sum(column) for column in zip(*gathered)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size})"


class ObjectCollectives(Collectives):
    """Collectives through a framework module with torch's object API (``barrier``,
    ``broadcast_object_list``, ``all_gather_object``): ``torch.distributed``, ``paddle.distributed``.

    ``gather_appends``: the module's ``all_gather_object`` appends to an empty list (paddle's)
    instead of filling one sized to the world (torch's). ``make_tensor``: a list of ints as the
    framework's integer tensor on this rank's communication device, for :meth:`sum_over_ranks` to sum with
    one ``all_reduce`` in :meth:`sum_over_ranks` (else it gathers pickled objects).
    """

    def __init__(self, facts: RankFacts, module: Any, gather_appends: bool = False,
                 make_tensor: Optional[Callable[[list[int]], Any]] = None) -> None:
        super().__init__(facts, distributed=True)
        self.module = module
        self._gather_appends = gather_appends
        self._make_tensor = make_tensor

    def barrier(self) -> None:
        self.module.barrier()

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        holder = [obj]
        self.module.broadcast_object_list(holder, src=src)
        return holder[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        gathered: list[Any] = [] if self._gather_appends else [None] * self.world_size
        self.module.all_gather_object(gathered, obj)
        return gathered

    def sum_over_ranks(self, values: Sequence[int]) -> list[int]:
        if self._make_tensor is None:
            return super().sum_over_ranks(values)
        sums = self._make_tensor([int(value) for value in values])
        self.module.all_reduce(sums)  # a sum by default, in torch and paddle
        return [int(value) for value in sums.tolist()]
