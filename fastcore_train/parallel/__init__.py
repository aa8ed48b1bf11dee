"""Running in parallel as a layer of its own: which rank this process is (``environment``)."""
from fastcore_train.parallel.environment import (LAUNCHED_RANK_ENV, MPIRUN, ONEFLOW_LAUNCH, PADDLE_LAUNCH,
                                                 SINGLE_PROCESS, TORCHRUN, LaunchEnvironment, RankFacts,
                                                 detect_rank_facts)

__all__ = ["LAUNCHED_RANK_ENV", "MPIRUN", "ONEFLOW_LAUNCH", "PADDLE_LAUNCH", "SINGLE_PROCESS", "TORCHRUN",
           "LaunchEnvironment", "RankFacts", "detect_rank_facts"]
