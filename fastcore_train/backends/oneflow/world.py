"""Which rank this process is, from the variables ``python -m oneflow.distributed.launch`` (or our
self-launch) sets, those variables for ranks we start ourselves, and the collectives of a rank
(:class:`OneflowCollectives`).

``import oneflow`` reads ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK`` once, when it
is imported, and builds its process-wide environment from them; a plain process gets
``WORLD_SIZE=1`` and ``RANK=-1`` written into ``os.environ`` by that import.
"""
from __future__ import annotations

import pickle
from typing import Any, Optional, Sequence

import oneflow as flow

from fastcore_train.drivers.collectives import Collectives
from fastcore_train.parallel.launch import free_port
from fastcore_train.parallel.loopback import choose_interfaces_from_environment
from fastcore_train.parallel.environment import ONEFLOW_LAUNCH, RankFacts
from fastcore_train.parallel.slurm import SlurmLaunchError, slurm_facts

#: What to do when oneflow fixed a world of one before SLURM's variables were read.
_IMPORT_ORDER_HINT = ("`import oneflow` reads RANK, WORLD_SIZE and MASTER_* once, when it is first imported, and "
                      "this process imported it before fastcore_train could write them from SLURM's variables. "
                      "Import fastcore_train before oneflow in the script, or export them in the job script: "
                      "srun bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS "
                      "MASTER_ADDR=... MASTER_PORT=... python train.py' (see docs/multinode.md, SLURM).")


def world_from_environment() -> Optional[RankFacts]:
    """The rank facts of a launched rank (oneflow's launcher, our self-launch, or srun through the
    variables ``import fastcore_train`` wrote); None in a plain process."""
    facts = ONEFLOW_LAUNCH.detect()
    if facts is None or not facts.is_distributed:
        srun = slurm_facts()
        if srun is not None:
            raise SlurmLaunchError(f"srun started this process as task {srun.rank} of {srun.world_size}, but "
                                   f"oneflow runs as a single process: {_IMPORT_ORDER_HINT}")
        return None
    if facts.launcher == "srun" and flow.env.get_world_size() != facts.world_size:
        raise SlurmLaunchError(f"srun started this process as task {facts.rank} of {facts.world_size}, but oneflow "
                               f"set itself up for {flow.env.get_world_size()}: {_IMPORT_ORDER_HINT}")
    return facts


#: The variable oneflow's transports read to choose an interface: NCCL's, when its GPU ranks first talk. OneFlow's
#: own control and CPU transports read none: they listen on every interface and reach each rank at the address
#: the master saw it connect from, which is the interface of its route toward the master (docs/security.md).
INTERFACE_VARIABLES = ("NCCL_SOCKET_IFNAME",)


def choose_transport_interface(world_size: int) -> dict[str, str]:
    """Before the first collective: NCCL binds to the loopback interface when every rank is on this machine,
    else to the interface of the route toward ``MASTER_ADDR``, unless the user set its variable (issue 39)."""
    return choose_interfaces_from_environment(INTERFACE_VARIABLES, world_size)


def launch_environments(world_size: int) -> list[dict[str, str]]:
    """OneFlow's launcher variables for each rank of a one-machine job we start ourselves."""
    port = free_port()
    return [ONEFLOW_LAUNCH.variables_for(rank, world_size, "127.0.0.1", port) for rank in range(world_size)]


class OneflowCollectives(Collectives):
    """``driver.comm`` of a oneflow DDP rank: objects are pickled into uint8 tensors on the rank's
    ``device`` and exchanged with ``oneflow.comm`` (which has no object collectives)."""

    def __init__(self, facts: RankFacts, device: Any) -> None:
        super().__init__(facts, distributed=True)
        self.device = device

    def barrier(self) -> None:
        flow.comm.barrier()

    def settle(self) -> None:
        """Wait, asleep, for the instructions queued so far (the gradients' all-reduce too).

        Called before each read of a collective's result: oneflow 0.9's own read (``item()``,
        ``numpy()``) spins the calling thread until the queue reaches it, taking a core from the
        runtime threads that compute it (``backends/oneflow/tensors.py``).
        """
        flow._oneflow_internal.eager.Sync()

    def all_gather_object(self, obj: Any) -> list[Any]:
        payload = flow.tensor(list(pickle.dumps(obj)), dtype=flow.uint8, device=self.device)
        size = flow.tensor([payload.numel()], dtype=flow.int64, device=self.device)
        sizes = [flow.zeros(1, dtype=flow.int64, device=self.device) for _ in range(self.world_size)]
        flow.comm.all_gather(sizes, size)
        self.settle()  # reads wait asleep (see settle)
        longest = max(int(s.item()) for s in sizes)
        padded = flow.zeros(longest, dtype=flow.uint8, device=self.device)
        padded[:payload.numel()] = payload
        gathered = [flow.zeros(longest, dtype=flow.uint8, device=self.device) for _ in range(self.world_size)]
        flow.comm.all_gather(gathered, padded)
        self.settle()
        return [pickle.loads(bytes(t.numpy()[:int(s.item())].tolist())) for t, s in zip(gathered, sizes)]

    def sum_over_ranks(self, values: Sequence[int]) -> list[int]:
        """Each integer summed over the ranks: one ``oneflow.comm.all_reduce``."""
        sums = flow.tensor([int(value) for value in values], dtype=flow.int64, device=self.device)
        flow.comm.all_reduce(sums)
        self.settle()
        return [int(value) for value in sums.tolist()]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        data = pickle.dumps(obj) if self.rank == src else b""
        size = flow.tensor([len(data)], dtype=flow.int64, device=self.device)
        flow.comm.broadcast(size, src)
        self.settle()
        payload = flow.zeros(int(size.item()), dtype=flow.uint8, device=self.device)
        if self.rank == src:
            payload = flow.tensor(list(data), dtype=flow.uint8, device=self.device)
        flow.comm.broadcast(payload, src)
        self.settle()
        return obj if self.rank == src else pickle.loads(bytes(payload.numpy().tolist()))
