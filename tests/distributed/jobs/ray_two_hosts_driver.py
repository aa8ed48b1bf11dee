"""The driver of the Ray two-host test (tests/distributed/test_two_hosts_ray.py), run on node0.

Usage: ray_two_hosts_driver.py ADDRESS OUT BATCH [FRAMEWORK]. Joins the Ray cluster at ADDRESS (a
head on node0, a worker node joined from node1, 2 CPUs each) and fits Ray Train's
``DataParallelTrainer`` with :class:`~fastcore_train.integrations.ray.RayBackendConfig` twice, into
OUT/1 and OUT/2: 2 workers of 1 CPU placed one per node (``STRICT_SPREAD``), then 4 workers of 1 CPU,
which the CPUs place two per node. Each worker runs the two-host job
(``two_hosts_job.py``: OUT/rank_<r>.json) and writes OUT/ray_<r>.json: the node Ray placed it on
(id and IP) and the launcher variables the backend gave it.
"""
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))


def train_loop(config: dict) -> None:
    import ray
    import ray.train

    from tests.distributed.jobs.two_hosts_job import main as train

    rank = ray.train.get_context().get_world_rank()
    placed = {"node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address(),
              "variables": {name: os.environ.get(name) for name in ("MASTER_ADDR", "MASTER_PORT", "RANK",
                                                                    "WORLD_SIZE", "LOCAL_RANK")}}
    Path(config["out"], f"ray_{rank}.json").write_text(json.dumps(placed))
    train(Path(config["out"]), config["batch"], config["framework"])
    ray.train.report({"rank": rank})


def main(address: str, out: Path, batch: int, framework: str = "torch") -> None:
    import ray

    ray.init(address=address, log_to_driver=True)
    print("cluster nodes:", [(node["NodeManagerAddress"], node["Resources"].get("CPU")) for node in ray.nodes()],
          flush=True)
    for per_node in (1, 2):
        (out / str(per_node)).mkdir()
        fit(out, batch, per_node, framework)
    ray.shutdown()


def fit(out: Path, batch: int, per_node: int, framework: str) -> None:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from fastcore_train.integrations.ray import RayBackendConfig

    trainer = DataParallelTrainer(
        train_loop, train_loop_config={"out": str(out / str(per_node)), "batch": batch, "framework": framework},
        backend_config=RayBackendConfig(framework),
        scaling_config=ScalingConfig(num_workers=2 * per_node, resources_per_worker={"CPU": 1},
                                     placement_strategy="STRICT_SPREAD" if per_node == 1 else "SPREAD"),
        run_config=RunConfig(name=f"two_hosts_{per_node}", storage_path=str(out / "ray_storage")))
    result = trainer.fit()
    if result.error is not None:
        raise SystemExit(f"the Ray job of {per_node} worker(s) per node failed: {result.error}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:5])
