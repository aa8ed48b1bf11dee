"""What every data-parallel driver shares, whatever its framework.

- :class:`DataParallelFacts`: the rank properties, read from the driver's ``world``
  (:class:`~fastcore_train.parallel.environment.RankFacts`).
- :class:`ObjectCollectives`: ``barrier``, ``broadcast_object`` and ``all_gather_object`` for
  frameworks whose distributed module has torch's object API (torch, paddle); a backend names
  the module.
- :func:`method_dispatch_class`: the module that lets a data-parallel wrapper's forward run any
  model method (``train_step``...), so that every training call synchronises gradients.

Mixed in before the backend's single-process driver, so they replace the single-process answers.
"""
from __future__ import annotations

from typing import Any

from fastcore_train.parallel.environment import RankFacts

class DataParallelFacts:
    """Rank facts of one rank of a data-parallel job."""

    world: RankFacts

    def is_distributed(self) -> bool:
        return True

    @property
    def rank(self) -> int:
        return self.world.rank

    @property
    def world_size(self) -> int:
        return self.world.world_size

    @property
    def local_rank(self) -> int:
        return self.world.local_rank


class ObjectCollectives:
    """Collectives over picklable objects through a framework module with torch's object API
    (``barrier``, ``broadcast_object_list``, ``all_gather_object``)."""

    world_size: int

    def distributed_module(self) -> Any:
        """The framework's distributed module (``torch.distributed``, ``paddle.distributed``)."""
        raise NotImplementedError

    def gather_list(self) -> list[Any]:
        """The list ``all_gather_object`` fills: torch's is pre-sized, paddle's appends."""
        return [None] * self.world_size

    def barrier(self) -> None:
        self.distributed_module().barrier()

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        holder = [obj]
        self.distributed_module().broadcast_object_list(holder, src=src)
        return holder[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        gathered = self.gather_list()
        self.distributed_module().all_gather_object(gathered, obj)
        return gathered


def method_dispatch_class(module_base: type, module_name: str) -> type:
    """A subclass of the framework's module class ``module_base`` wrapping a model, whose forward
    runs the model method named by its first argument (``"forward"``: the model's own call).

    Named ``_MethodDispatch`` in ``module_name`` (the backend module that uses it), so that it
    reads and pickles as a class of that module.
    """

    def __init__(self: Any, model: Any) -> None:
        module_base.__init__(self)
        self.model = model

    def forward(self: Any, fastcore_method: str, *args: Any, **kwargs: Any) -> Any:
        if fastcore_method == "forward":
            return self.model(*args, **kwargs)
        return getattr(self.model, fastcore_method)(*args, **kwargs)

    dispatch = type("_MethodDispatch", (module_base,), {
        "__init__": __init__, "forward": forward, "__module__": module_name,
        "__doc__": "Lets a data-parallel wrapper's forward run any model method, so gradients are synchronised.",
    })
    return dispatch
