"""The 2-rank metrics job, the same for every backend: python metrics_job.py CONFIG_JSON.

Evaluates the metrics of tests/compat/metric_suite.py over ``samples`` samples (37: the ranks get
unequal shares) with each rank evaluating a share (``split``) and with every rank seeing all of
it (``whole``, use_dist_sampler=False), then uses a fastNLP-style metric alone, reduced over the
framework's own process group (``standalone``). Each rank writes ``<out>/rank_<r>.json``.
"""
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script; a pool rank has it already
    sys.path.insert(0, str(ROOT))

from fastcore_train import Evaluator  # noqa: E402
from fastcore_train.metrics.element_ops import element_ops  # noqa: E402
from tests.compat.metric_suite import (FastNLPStyleStats, all_metrics, input_mapping,  # noqa: E402
                                       output_mapping)
from tests.conformance.harnesses.base import initial_weights, make_data, numpy_logits  # noqa: E402
from tests.distributed.launchers import BACKENDS  # noqa: E402


def main(config):
    backend = BACKENDS[config["backend"]]
    harness = importlib.import_module(f"tests.conformance.harnesses.{backend.name}").Harness()
    x, y = make_data(config["samples"], seed=9)
    batch_size = 5 * (config["world_size"] if backend.global_batch_size else 1)
    model = harness.make_model(initial_weights())
    results, evaluator = {}, None
    for name, split in (("split", True), ("whole", False)):
        evaluator = Evaluator(model, {"dev": harness.make_dataloader(x, y, batch_size, with_index=True)},
                              all_metrics(backend.name), driver=harness.driver_name if evaluator is None else
                              evaluator.driver, device=config["device"], input_mapping=input_mapping,
                              output_mapping=output_mapping, verbose=0, use_dist_sampler=split)
        results[name] = evaluator.run()
    driver = evaluator.driver
    # fastNLP's own pattern: each rank updates a metric with its share, get_metric() reduces
    # over the framework's process group (no Evaluator, no driver).
    ops = element_ops(backend.name)
    logits = numpy_logits(initial_weights(), x)
    metric = FastNLPStyleStats(aggregate_when_get_metric=True)
    share = slice(driver.comm.rank, None, driver.comm.world_size)
    metric.update(ops.from_numpy(logits[share]), ops.from_numpy(y[share]))
    standalone = metric.get_metric()
    local_after = metric.total.get_scalar()
    Path(config["out"], f"rank_{driver.comm.rank}.json").write_text(json.dumps({
        "results": results, "standalone": standalone, "local_after": local_after,
        "world_size": driver.comm.world_size, "element_type": type(metric.correct.value).__name__}))
    driver.comm.barrier()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
