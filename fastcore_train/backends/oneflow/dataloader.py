"""Reading how a ``oneflow.utils.data.DataLoader`` samples, and rebuilding it around another batch
sampler (the user's loader is left untouched)."""
from __future__ import annotations

import inspect
from typing import Any, Optional

from oneflow.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

from fastcore_train.samplers.adapt import DataLoaderArgs

#: Parameters that describe sampling: the new batch sampler replaces all of them.
_SAMPLING = frozenset({"self", "batch_size", "shuffle", "sampler", "batch_sampler", "drop_last"})


def _sampler_kind(sampler: Any) -> str:
    if type(sampler) is RandomSampler and not sampler.replacement and sampler._num_samples is None:
        return "random"
    if type(sampler) is SequentialSampler:
        return "sequential"
    return "custom"


def get_dataloader_args(dataloader: Any) -> Optional[DataLoaderArgs]:
    """How a oneflow DataLoader samples; None for loaders that cannot take a batch sampler."""
    if not isinstance(dataloader, DataLoader) or isinstance(dataloader.dataset, IterableDataset):
        return None
    batch_sampler = dataloader.batch_sampler
    if batch_sampler is None:  # batch_size=None: no automatic batching
        return None
    default_batching = type(batch_sampler) is BatchSampler
    sampler = batch_sampler.sampler if default_batching else dataloader.sampler
    return DataLoaderArgs(
        dataset=dataloader.dataset, batch_size=getattr(batch_sampler, "batch_size", None),
        drop_last=bool(getattr(batch_sampler, "drop_last", False)), sampler=sampler,
        batch_sampler=batch_sampler, sampler_kind=_sampler_kind(sampler), default_batching=default_batching)


def _stored_arguments(dataloader: DataLoader, parameters: Any, required: bool) -> dict[str, Any]:
    """The values of ``parameters`` (other than sampling ones) kept on ``dataloader``."""
    arguments = {}
    for name, parameter in parameters.items():
        if name in _SAMPLING or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if hasattr(dataloader, name):
            arguments[name] = getattr(dataloader, name)
        elif required and parameter.default is parameter.empty:
            raise TypeError(
                f"Cannot rebuild the DataLoader subclass {type(dataloader).__name__}: its __init__ needs "
                f"{name!r}, which is not stored on the instance. Store it as self.{name} in __init__ so the "
                "trainer can rebuild the loader with a reproducible sampler.")
    return arguments


def replace_batch_sampler(dataloader: DataLoader, batch_sampler: Any) -> DataLoader:
    """A new loader of the same class and settings drawing from ``batch_sampler``.

    A DataLoader subclass is rebuilt through its own ``__init__``: it must accept ``batch_sampler``
    (or ``**kwargs`` passed on to DataLoader) and keep its other parameters on the instance.
    """
    cls = type(dataloader)
    arguments = _stored_arguments(dataloader, inspect.signature(DataLoader.__init__).parameters, required=False)
    if cls is not DataLoader:
        parameters = inspect.signature(cls.__init__).parameters
        takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
        if "batch_sampler" not in parameters and not takes_any:
            raise TypeError(
                f"Cannot give the DataLoader subclass {cls.__name__} a reproducible batch sampler: its "
                "__init__ takes no batch_sampler. Accept **kwargs and pass them to oneflow.utils.data.DataLoader, "
                "or use a plain oneflow.utils.data.DataLoader.")
        own = _stored_arguments(dataloader, parameters, required=True)
        arguments = {**arguments, **own} if takes_any else own
    if not arguments.get("num_workers"):
        arguments.pop("prefetch_factor", None)
        arguments.pop("persistent_workers", None)
    return cls(batch_sampler=batch_sampler, **arguments)
