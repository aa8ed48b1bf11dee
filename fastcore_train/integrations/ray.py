"""Ray Train: :class:`RayBackendConfig` makes the workers of Ray's ``DataParallelTrainer`` one
data-parallel job for a fastcore_train backend.

Ray starts the worker processes itself; before the training function runs, the config's backend
writes into each worker the variables the framework's own launcher would have set (torchrun's,
paddle's launcher's, oneflow's launcher's), made once for every framework by
:mod:`fastcore_train.integrations.worker_ranks`. ``Trainer(driver=..., device=None)`` inside the
training function then reads them as it reads a launcher's and forms the job. For oneflow, whose ranks
meet inside ``import oneflow``, every worker but rank 0 holds that import until rank 0 listens
(:mod:`fastcore_train.integrations.import_gate`). For torch, Ray's
own ``TorchTrainer`` does the same and stays the first choice. Jittor's MPI cannot be joined by
processes mpirun did not start: more than one jittor worker is refused with the reason.
"""
from __future__ import annotations

import os
import socket
from typing import Any

try:
    import ray
    from ray.train.backend import Backend, BackendConfig
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("fastcore_train.integrations.ray needs Ray Train, which is not installed. Install it with: "
                      'pip install "fastcore-train[ray]"') from error

from fastcore_train.drivers.registry import get_backend
from fastcore_train.integrations.import_gate import hold_import_until_listening
from fastcore_train.integrations.worker_ranks import check_joinable, worker_variables
from fastcore_train.log import adopt_launched_rank

ENGINE = "ray"
#: What to do instead when a framework's ranks cannot be Ray's workers.
_REMEDY = ("Start its ranks with its own launcher instead of Ray (see docs/ray.md and docs/multinode.md).")


def _where() -> tuple[str, str]:
    """This worker's Ray node id and the address other nodes reach it at."""
    return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()


def _master() -> str:
    """``host:port`` of a port free right now on this worker's node (the job's rendezvous)."""
    host = ray.util.get_node_ip_address()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return f"{host}:{probe.getsockname()[1]}"


def _adopt(variables: dict[str, str], rank_names: tuple[str, str]) -> None:
    """Write the launcher variables into this worker and tell the log its rank."""
    os.environ.update(variables)
    adopt_launched_rank(int(variables[rank_names[0]]), int(variables[rank_names[1]]))


class _FastcoreBackend(Backend):
    """Ray's hook into each worker group: writes the launcher variables before training starts."""

    #: Every worker of a node sees all of the node's GPUs (as under a launcher), so that
    #: ``device=None`` picks GPU ``LOCAL_RANK`` as it does there; Ray's torch backend does the same.
    share_cuda_visible_devices: bool = True

    def on_start(self, worker_group: Any, backend_config: "RayBackendConfig") -> None:
        count = len(worker_group)
        if count < 2:
            return  # one worker is a plain process: the Trainer runs it as a world of 1
        entry = get_backend(backend_config.backend_name)
        environment = entry.launch_environment
        check_joinable(environment, entry.name, "Ray", _REMEDY)
        placed = worker_group.execute(_where)
        master = worker_group.execute_single(0, _master)
        variables = worker_variables(environment, [node for node, _ in placed], [host for _, host in placed],
                                     master, ENGINE)
        names = (environment.rank[0], environment.world_size[0])
        ray.get([worker_group.execute_single_async(index, _adopt, variables[index], names) for index in range(count)])
        rendezvous = entry.import_rendezvous(variables)  # oneflow: the others import it once rank 0 listens
        if rendezvous is not None:
            ray.get([worker_group.execute_single_async(index, hold_import_until_listening, entry.framework_module,
                                                       rendezvous) for index in range(1, count)])


class RayBackendConfig(BackendConfig):
    """A Ray Train ``BackendConfig`` for ``DataParallelTrainer``: its workers form one
    data-parallel job of the fastcore_train backend ``framework`` (``"torch"``, ``"paddle"``,
    ``"oneflow"``; ``"jittor"`` is refused for more than one worker, see docs/ray.md)."""

    def __init__(self, framework: str) -> None:
        entry = get_backend(framework)
        if entry.launch_environment is None:
            raise ValueError(f"Backend {framework!r} declares no launcher variables, so Ray's workers cannot be "
                             "told their ranks.")
        self.backend_name = entry.name

    @property
    def backend_cls(self) -> type:
        return _FastcoreBackend

    def to_dict(self) -> dict[str, Any]:
        return {"framework": self.backend_name}

    def __repr__(self) -> str:
        return f"RayBackendConfig({self.backend_name!r})"
