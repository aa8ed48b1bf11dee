"""``train_job.main`` started from a function, as a notebook would: ``fastcore_train.launch`` (the same as
``notebook_launcher``) runs it on 2 new rank processes. Usage: python launch_job.py CONFIG_JSON."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fastcore_train import launch  # noqa: E402
from tests.distributed.jobs import train_job  # noqa: E402

if __name__ == "__main__":
    config = json.loads(sys.argv[1])
    world_size = config["world_size"]
    launch(train_job.main, ({**config, "device": None},), num_processes=world_size, driver=config["backend"])
