"""The training function of the Ray tests (tests/distributed/test_ray.py): the conformance job
(``train_job.py``, ``device=None``) inside a Ray Train worker, then its checkpoint reported to Ray."""
from pathlib import Path


def train_loop(config: dict) -> None:
    import ray.train

    from tests.distributed.jobs.train_job import main

    main(config)  # writes <out>/rank_<r>.json|npz and, with save_after_run, a checkpoint there
    rank = ray.train.get_context().get_world_rank()
    folder = Path(config["save_after_run"])
    checkpoint = ray.train.Checkpoint.from_directory(str(folder)) if rank == 0 else None
    ray.train.report({"rank": rank, "checkpoint_files": len(list(folder.rglob("*")))}, checkpoint=checkpoint)
