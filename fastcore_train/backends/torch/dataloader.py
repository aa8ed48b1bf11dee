"""Reading how a torch DataLoader samples, and rebuilding it around another batch sampler."""
from __future__ import annotations

import inspect
from typing import Any, Optional

from torch.utils.data import BatchSampler, DataLoader, IterableDataset
from torch.utils.data import RandomSampler as TorchRandomSampler
from torch.utils.data import SequentialSampler as TorchSequentialSampler

from fastcore_train.samplers.adapt import DataLoaderArgs

# DataLoader.__init__ parameters that describe sampling; everything else is copied over as is.
_SAMPLING_PARAMETERS = {"self", "batch_size", "shuffle", "sampler", "batch_sampler", "drop_last"}
_DATALOADER_PARAMETERS = set(inspect.signature(DataLoader.__init__).parameters) - _SAMPLING_PARAMETERS


def _sampler_kind(sampler: Any) -> str:
    if type(sampler) is TorchRandomSampler and not sampler.replacement and sampler._num_samples is None:
        return "random"
    if type(sampler) is TorchSequentialSampler:
        return "sequential"
    return "custom"


def get_dataloader_args(dataloader: Any) -> Optional[DataLoaderArgs]:
    """How a torch DataLoader samples; None for loaders that cannot take a batch sampler."""
    if not isinstance(dataloader, DataLoader) or isinstance(dataloader.dataset, IterableDataset):
        return None
    batch_sampler = dataloader.batch_sampler
    if batch_sampler is None:  # batch_size=None: no automatic batching
        return None
    default_batching = type(batch_sampler) is BatchSampler
    # With batch_sampler= given, dataloader.sampler is an unused default: read the batch sampler's.
    sampler = batch_sampler.sampler if default_batching else dataloader.sampler
    return DataLoaderArgs(
        dataset=dataloader.dataset, batch_size=getattr(batch_sampler, "batch_size", None),
        drop_last=bool(getattr(batch_sampler, "drop_last", False)), sampler=sampler,
        batch_sampler=batch_sampler, sampler_kind=_sampler_kind(sampler),
        default_batching=default_batching,
    )


def replace_batch_sampler(dataloader: DataLoader, batch_sampler: Any) -> DataLoader:
    """A new loader of the same class and settings drawing from ``batch_sampler``.

    A DataLoader subclass is rebuilt through its own ``__init__``; each extra parameter it takes
    must be stored on the instance under the same name, or have a default.
    """
    cls = type(dataloader)
    kwargs = {name: getattr(dataloader, name) for name in _DATALOADER_PARAMETERS if hasattr(dataloader, name)}
    if dataloader.num_workers == 0:
        kwargs.pop("prefetch_factor", None)
    if cls is not DataLoader:
        parameters = inspect.signature(cls.__init__).parameters
        takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
        if "batch_sampler" not in parameters and not takes_any:
            raise TypeError(
                f"Cannot give the DataLoader subclass {cls.__name__} a reproducible batch sampler: its "
                "__init__ takes no batch_sampler. Accept **kwargs and pass them to DataLoader.__init__, or "
                "use a plain torch.utils.data.DataLoader."
            )
        if not takes_any:
            kwargs = {name: value for name, value in kwargs.items() if name in parameters}
        for name, parameter in parameters.items():
            if name in _SAMPLING_PARAMETERS or name in kwargs or parameter.kind in (parameter.VAR_KEYWORD,
                                                                                     parameter.VAR_POSITIONAL):
                continue
            if hasattr(dataloader, name):
                kwargs[name] = getattr(dataloader, name)
            elif parameter.default is parameter.empty:
                raise TypeError(
                    f"Cannot rebuild the DataLoader subclass {cls.__name__}: its __init__ needs {name!r}, "
                    f"which is not stored on the instance. Store it as self.{name} in __init__ so the "
                    "trainer can rebuild the loader with a reproducible sampler."
                )
    return cls(batch_sampler=batch_sampler, **kwargs)
