"""The driver of the Ray two-host test (tests/distributed/test_two_hosts_ray.py), run on node0.

Usage: ray_two_hosts_driver.py ADDRESS OUT BATCH [FRAMEWORK]. Joins the Ray cluster at ADDRESS (a
head on node0, a worker node joined from node1, 2 CPUs each) and fits Ray Train's
``DataParallelTrainer`` with :class:`~fastcore_train.integrations.ray.RayBackendConfig` twice, into
OUT/1 and OUT/2: 2 workers of 1 CPU placed one per node (``STRICT_SPREAD``), then 4 workers of 1 CPU,
which the CPUs place two per node (on paddle Ray starts that group again up to twice: paddle 3.3's gloo
start-up race, docs/ray.md). Each worker runs the two-host job
(``two_hosts_job.py``: OUT/rank_<r>.json) and writes OUT/ray_<r>.json: the node Ray placed it on
(id and IP) and what the backend's launcher variables Ray's workers were given say: rank, local
rank, node, master ``host:port`` and, for paddle, this rank's endpoint. A worker whose training raised
writes its traceback to OUT/failed/<master port>_<rank>.txt (the port tells one attempt from another).
"""
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
#: Restarts of a paddle job of more than 2 CPU workers (see :func:`restarts`).
PADDLE_RESTARTS = 2


def train_loop(config: dict) -> None:
    import ray
    import ray.train

    from fastcore_train.drivers.registry import get_backend
    from tests.distributed.jobs.two_hosts_job import main as train

    rank = ray.train.get_context().get_world_rank()
    environment = get_backend(config["framework"]).launch_environment
    facts = environment.detect()
    endpoint = next((os.environ[name] for name in environment.current_endpoint if os.environ.get(name)), None)
    placed = {"node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address(),
              "launched": None if facts is None else {
                  "rank": facts.rank, "local_rank": facts.local_rank, "world_size": facts.world_size,
                  "node_rank": facts.node_rank, "master": facts.master_address, "endpoint": endpoint}}
    Path(config["out"], f"ray_{rank}.json").write_text(json.dumps(placed))
    try:
        train(Path(config["out"]), config["batch"], config["framework"])
    except BaseException:
        # Kept for the test, one file per attempt (its master port) and rank: a paddle attempt Ray starts again.
        failed = Path(config["out"], "failed")
        failed.mkdir(exist_ok=True)
        (failed / f"{placed['launched']['master'].rsplit(':', 1)[1]}_{rank}.txt").write_text(traceback.format_exc())
        raise
    ray.train.report({"rank": rank})


def main(address: str, out: Path, batch: int, framework: str = "torch") -> None:
    import ray

    started = time.perf_counter()
    ray.init(address=address, log_to_driver=True)
    print(f"joined the cluster in {time.perf_counter() - started:.1f} s", flush=True)
    print("cluster nodes:", [(node["NodeManagerAddress"], node["Resources"].get("CPU")) for node in ray.nodes()],
          flush=True)
    for per_node in (1, 2):
        (out / str(per_node)).mkdir()
        started = time.perf_counter()
        fit(out, batch, per_node, framework)
        print(f"fit of {per_node} worker(s) per node: {time.perf_counter() - started:.1f} s", flush=True)
    ray.shutdown()


def fit(out: Path, batch: int, per_node: int, framework: str) -> None:
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from fastcore_train.integrations.ray import RayBackendConfig

    trainer = DataParallelTrainer(
        train_loop, train_loop_config={"out": str(out / str(per_node)), "batch": batch, "framework": framework},
        backend_config=RayBackendConfig(framework),
        scaling_config=ScalingConfig(num_workers=2 * per_node, resources_per_worker={"CPU": 1},
                                     placement_strategy="STRICT_SPREAD" if per_node == 1 else "SPREAD"),
        run_config=RunConfig(name=f"two_hosts_{per_node}", storage_path=str(out / "ray_storage"),
                             failure_config=FailureConfig(max_failures=restarts(framework, 2 * per_node))))
    result = trainer.fit()
    if result.error is not None:
        raise SystemExit(f"the Ray job of {per_node} worker(s) per node failed: {result.error}")


def restarts(framework: str, workers: int) -> int:
    """How many times Ray starts a failed worker group again: twice for more than 2 paddle CPU workers, whose
    gloo start-up paddle 3.3 races (docs/ray.md, Paddle); never otherwise, so any failure fails the test."""
    return PADDLE_RESTARTS if framework == "paddle" and workers > 2 else 0


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:5])
