"""``overfit_batches``: train (and evaluate) on the same first few batches, to debug a model."""
from __future__ import annotations

import itertools
from typing import Any, Iterator


class OverfitDataLoader:
    """The first ``num_batches`` batches of a dataloader (-1: all of them), fetched once and replayed."""

    def __init__(self, dataloader: Any, num_batches: int) -> None:
        source = iter(dataloader)
        self.batches = list(source if num_batches == -1 else itertools.islice(source, num_batches))
        if not self.batches:
            raise ValueError("overfit_batches found no batch in train_dataloader.")
        self.dataloader = dataloader

    def __iter__(self) -> Iterator[Any]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)
