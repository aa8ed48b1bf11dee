"""How torch names devices, for the shared reading of ``device=`` (:mod:`fastcore_train.parallel.placement`)."""
from __future__ import annotations

from typing import Any

import torch

from fastcore_train.parallel.environment import RankFacts


class TorchDevices:
    framework = "torch"

    def all_gpus(self) -> list[Any]:
        return [torch.device("cuda", index) for index in range(torch.cuda.device_count())]

    def default_rank_device(self, facts: RankFacts) -> Any:
        return torch.device("cuda", facts.local_rank) if torch.cuda.is_available() else "cpu"


DEVICES = TorchDevices()
