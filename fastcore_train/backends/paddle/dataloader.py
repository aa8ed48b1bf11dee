"""Reading how a ``paddle.io.DataLoader`` samples, and rebuilding it around another batch sampler.

A paddle DataLoader draws index lists from its ``batch_sampler``: a ``paddle.io.BatchSampler``
over ``RandomSampler``/``SequenceSampler`` when built with ``batch_size``/``shuffle``, or the one
the user passed. ``DistributedBatchSampler`` (paddle's own rank split) is read as the plain
shuffled or sequential batching it performs, since the Trainer splits data across ranks itself.
"""
from __future__ import annotations

import inspect
from typing import Any, Optional

from paddle.io import BatchSampler, DataLoader, DistributedBatchSampler, IterableDataset
from paddle.io import RandomSampler as PaddleRandomSampler
from paddle.io import SequenceSampler as PaddleSequenceSampler

from fastcore_train.samplers.adapt import DataLoaderArgs

#: DataLoader.__init__ parameters that describe sampling; the others are copied to the new loader.
_SAMPLING = frozenset({"self", "batch_sampler", "batch_size", "shuffle", "drop_last"})
#: Where a DataLoader keeps each copied parameter, when the attribute name differs.
_STORED_AS = {"persistent_workers": "_persistent_workers"}


def _sampler_kind(sampler: Any) -> str:
    if type(sampler) is PaddleRandomSampler and not sampler.replacement and sampler._num_samples is None \
            and sampler.generator is None:
        return "random"
    if type(sampler) is PaddleSequenceSampler:
        return "sequential"
    return "custom"


def get_dataloader_args(dataloader: Any) -> Optional[DataLoaderArgs]:
    """How a paddle DataLoader samples; None for loaders that cannot take a batch sampler."""
    if not isinstance(dataloader, DataLoader) or isinstance(dataloader.dataset, IterableDataset):
        return None
    batch_sampler = dataloader.batch_sampler
    if batch_sampler is None:  # batch_size=None: samples one by one, no batching to replace
        return None
    if type(batch_sampler) is DistributedBatchSampler:
        return DataLoaderArgs(
            dataset=batch_sampler.dataset, batch_size=batch_sampler.batch_size,
            drop_last=batch_sampler.drop_last, sampler=None, batch_sampler=batch_sampler,
            sampler_kind="random" if batch_sampler.shuffle else "sequential", default_batching=True)
    default_batching = type(batch_sampler) is BatchSampler
    sampler = getattr(batch_sampler, "sampler", None)
    return DataLoaderArgs(
        dataset=dataloader.dataset, batch_size=getattr(batch_sampler, "batch_size", None),
        drop_last=bool(getattr(batch_sampler, "drop_last", False)), sampler=sampler,
        batch_sampler=batch_sampler, sampler_kind=_sampler_kind(sampler), default_batching=default_batching)


def _constructor_arguments(dataloader: DataLoader, parameters: Any) -> dict[str, Any]:
    """The values ``dataloader`` was built with, for every non-sampling parameter it stores."""
    arguments = {}
    for name, parameter in parameters.items():
        if name in _SAMPLING or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        attribute = _STORED_AS.get(name, name)
        if hasattr(dataloader, attribute):
            arguments[name] = getattr(dataloader, attribute)
        elif parameter.default is parameter.empty:
            raise TypeError(
                f"Cannot rebuild the DataLoader subclass {type(dataloader).__name__}: its __init__ needs "
                f"{name!r}, which is not stored on the instance. Store it as self.{name} in __init__ so the "
                "trainer can rebuild the loader with a reproducible sampler.")
    return arguments


def replace_batch_sampler(dataloader: DataLoader, batch_sampler: Any) -> DataLoader:
    """A new loader of the same class and settings drawing from ``batch_sampler``; the user's
    loader is left as it was.

    A DataLoader subclass is rebuilt through its own ``__init__``: it must accept
    ``batch_sampler`` (or ``**kwargs`` passed on to DataLoader), and keep every other parameter
    it takes on the instance under the same name (or give it a default).
    """
    cls = type(dataloader)
    arguments = _constructor_arguments(dataloader, inspect.signature(DataLoader.__init__).parameters)
    if cls is not DataLoader:
        parameters = inspect.signature(cls.__init__).parameters
        takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
        if "batch_sampler" not in parameters and not takes_any:
            raise TypeError(
                f"Cannot give the DataLoader subclass {cls.__name__} a reproducible batch sampler: its "
                "__init__ takes no batch_sampler. Accept **kwargs and pass them to paddle.io.DataLoader, "
                "or use a plain paddle.io.DataLoader.")
        own = _constructor_arguments(dataloader, parameters)
        arguments = {**arguments, **own} if takes_any else own
    return cls(batch_sampler=batch_sampler, **arguments)
