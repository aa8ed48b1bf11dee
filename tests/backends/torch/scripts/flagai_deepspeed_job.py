"""A FlagAI user's DeepSpeed run, as a real script: FlagAI's command line and deepspeed.json.

Usage: python flagai_deepspeed_job.py --env_type=deepspeed --num_gpus=2 --pytorch_device=cpu
--deepspeed_config=<FlagAI's deepspeed.json> --epochs=2 --batch_size=4 --out=<folder>
(self-launched: rank 0 starts the other rank). The Trainer gets ``optimizers=None``: DeepSpeed
builds the config's optimizer. Each rank writes ``<out>/rank_<r>.json``: the optimizer DeepSpeed
built, the ZeRO stage, the model summary's parameter count, the first and last losses, and
the gathered final weights.
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

from fastcore_train import Callback, Trainer, summarize  # noqa: E402
from fastcore_train.config import EnvArgs  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.torch import Harness  # noqa: E402


class Losses(Callback):
    """Record every training loss."""

    def __init__(self):
        self.values = []

    def on_before_backward(self, trainer, outputs):
        self.values.append(float(outputs["loss"]))


def main():
    env_args = EnvArgs(env_type="deepspeed", epochs=1, batch_size=4)
    env_args.add_arg(arg_name="out", default=".")
    args = env_args.parse_args()
    harness = Harness()
    x, y = make_data(64, seed=4)
    losses = Losses()
    trainer = Trainer(harness.make_model(initial_weights()), harness.make_dataloader(x, y, args.batch_size), None,
                      callbacks=[losses], **args.trainer_args().replace(progress_bar=None).trainer_kwargs())
    trainer.run(num_eval_sanity_batch=0)
    driver = trainer.driver
    weights = {name: value.numpy().tolist() for name, value in driver.full_state_dict().items()}
    Path(args.out, f"rank_{driver.comm.rank}.json").write_text(json.dumps({
        "world_size": driver.comm.world_size, "zero_stage": driver.zero_stage,
        "optimizer": type(driver.engine.basic_optimizer).__name__,
        "summary_params": summarize(driver.unwrap_model()).total_params,
        "param_dtype": str(next(driver.unwrap_model().parameters()).dtype),
        "placeholders": sum(p.numel() == 0 for p in driver.unwrap_model().parameters()),
        "losses": losses.values, "weights": weights}))


if __name__ == "__main__":
    main()
