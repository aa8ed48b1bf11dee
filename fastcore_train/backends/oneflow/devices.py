"""How oneflow names devices, for the shared reading of ``device=`` (:mod:`fastcore_train.parallel.placement`)."""
from __future__ import annotations

from typing import Any

import oneflow as flow

from fastcore_train.parallel.environment import RankFacts


class OneflowDevices:
    framework = "oneflow"

    def all_gpus(self) -> list[Any]:
        return [f"cuda:{index}" for index in range(flow.cuda.device_count())]

    def default_rank_device(self, facts: RankFacts) -> Any:
        return f"cuda:{facts.local_rank}" if flow.cuda.is_available() else "cpu"


DEVICES = OneflowDevices()
