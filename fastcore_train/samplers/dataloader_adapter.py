"""Reading and rebuilding map-style DataLoaders of the torch family, without importing a framework.

torch, paddle and oneflow share one DataLoader design: a loader draws index lists from a
``batch_sampler`` (by default a ``BatchSampler`` over a random or sequential sampler) and keeps
its constructor arguments on itself. Reading how such a loader samples (:class:`DataLoaderArgs`)
and rebuilding it around another batch sampler is therefore written once here; a backend builds
a :class:`DataLoaderAdapter` from its framework's classes and names (and overrides a hook where
its framework differs).
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from fastcore_train.samplers.adapt import DataLoaderArgs


@dataclass(frozen=True, kw_only=True)
class DataLoaderAdapter:
    """One framework's DataLoader classes, and the logic reading and rebuilding its loaders.

    ``dataloader``, ``iterable_dataset``, ``batch_sampler``, ``random_sampler`` and
    ``sequential_sampler``: the framework's classes; ``dataloader_path``: the DataLoader's dotted
    name, for error messages; ``sampling``: the DataLoader parameters that describe sampling (the
    new batch sampler replaces them all; the others are copied to the new loader);
    ``stored_as``: where a loader keeps a parameter whose attribute has another name;
    ``worker_only``: parameters dropped when the loader has no worker processes.
    """

    dataloader: type
    iterable_dataset: type
    batch_sampler: type
    random_sampler: type
    sequential_sampler: type
    dataloader_path: str
    sampling: frozenset[str]
    stored_as: Mapping[str, str] = field(default_factory=dict)
    worker_only: tuple[str, ...] = ()

    # ------------------------------------------------------------------ hooks a framework may override
    def is_plain_shuffle(self, sampler: Any) -> bool:
        """Whether a ``random_sampler`` draws a plain permutation (no replacement, all samples)."""
        return not sampler.replacement and sampler._num_samples is None

    def index_sampler(self, dataloader: Any, batch_sampler: Any, default_batching: bool) -> Any:
        """The sampler ``batch_sampler`` takes its indices from."""
        # With batch_sampler= given, dataloader.sampler is an unused default: read the batch sampler's.
        return batch_sampler.sampler if default_batching else dataloader.sampler

    # ------------------------------------------------------------------ building
    def from_dataset(self, dataset: Any, batch_size: int, shuffle: bool, drop_last: bool, num_workers: int) -> Any:
        """A new DataLoader over ``dataset`` (fastNLP 0.x's ``DistTrainer`` builds its own from a dataset)."""
        return self.dataloader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                               num_workers=num_workers)

    # ------------------------------------------------------------------ reading
    def sampler_kind(self, sampler: Any) -> str:
        """``"random"``, ``"sequential"`` or ``"custom"``, as :class:`DataLoaderArgs` describes them."""
        if type(sampler) is self.random_sampler and self.is_plain_shuffle(sampler):
            return "random"
        if type(sampler) is self.sequential_sampler:
            return "sequential"
        return "custom"

    def get_dataloader_args(self, dataloader: Any) -> Optional[DataLoaderArgs]:
        """How ``dataloader`` samples; None for loaders that cannot take a batch sampler."""
        if not isinstance(dataloader, self.dataloader) or isinstance(dataloader.dataset, self.iterable_dataset):
            return None
        batch_sampler = dataloader.batch_sampler
        if batch_sampler is None:  # batch_size=None: samples one by one, no batching to replace
            return None
        return self.describe(dataloader, batch_sampler)

    def describe(self, dataloader: Any, batch_sampler: Any) -> DataLoaderArgs:
        """How a map-style ``dataloader`` samples, drawing its index lists from ``batch_sampler``."""
        default_batching = type(batch_sampler) is self.batch_sampler
        sampler = self.index_sampler(dataloader, batch_sampler, default_batching)
        return DataLoaderArgs(
            dataset=dataloader.dataset, batch_size=getattr(batch_sampler, "batch_size", None),
            drop_last=bool(getattr(batch_sampler, "drop_last", False)), sampler=sampler,
            batch_sampler=batch_sampler, sampler_kind=self.sampler_kind(sampler), default_batching=default_batching)

    # ------------------------------------------------------------------ rebuilding
    def stored_arguments(self, dataloader: Any, parameters: Mapping[str, inspect.Parameter],
                         required: bool) -> dict[str, Any]:
        """The values of ``parameters`` (other than sampling ones) kept on ``dataloader``.

        With ``required``, a parameter without a default that the loader does not keep is an error.
        """
        arguments = {}
        for name, parameter in parameters.items():
            variadic = parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
            if name == "self" or name in self.sampling or variadic:
                continue
            attribute = self.stored_as.get(name, name)
            if hasattr(dataloader, attribute):
                arguments[name] = getattr(dataloader, attribute)
            elif required and parameter.default is parameter.empty:
                raise TypeError(
                    f"Cannot rebuild the DataLoader subclass {type(dataloader).__name__}: its __init__ needs "
                    f"{name!r}, which is not stored on the instance. Store it as self.{name} in __init__ so "
                    "the trainer can rebuild the loader with a reproducible sampler.")
        return arguments

    def replace_batch_sampler(self, dataloader: Any, batch_sampler: Any) -> Any:
        """A new loader of the same class and settings drawing from ``batch_sampler``; the user's
        loader is left as it was.

        A DataLoader subclass is rebuilt through its own ``__init__``: it must accept
        ``batch_sampler`` (or ``**kwargs`` passed on to DataLoader), and keep every other parameter
        it takes on the instance under the same name (or give it a default).
        """
        cls = type(dataloader)
        arguments = self.stored_arguments(dataloader, inspect.signature(self.dataloader.__init__).parameters,
                                          required=False)
        if cls is not self.dataloader:
            parameters = inspect.signature(cls.__init__).parameters
            takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
            if "batch_sampler" not in parameters and not takes_any:
                raise TypeError(
                    f"Cannot give the DataLoader subclass {cls.__name__} a reproducible batch sampler: its "
                    f"__init__ takes no batch_sampler. Accept **kwargs and pass them to {self.dataloader_path}, "
                    f"or use a plain {self.dataloader_path}.")
            own = self.stored_arguments(dataloader, parameters, required=True)
            arguments = {**arguments, **own} if takes_any else own
        if not getattr(dataloader, "num_workers", 0):
            for name in self.worker_only:
                arguments.pop(name, None)
        return cls(batch_sampler=batch_sampler, **arguments)
