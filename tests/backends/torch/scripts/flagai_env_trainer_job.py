"""FlagAI's EnvTrainer example as its user keeps it, started by FlagAI's documented launcher line.

FlagAI-Open/FlagAI, examples/vit_cifar100/train_env_trainer.py: the EnvArgs block with a device
object (``torch.device("cuda" if torch.cuda.is_available() else "cpu")``), ``add_arg`` and
``parse_args()``; only the EnvTrainer became our Trainer (docs/migration.md, "Coming from FlagAI").
Run as FlagAI's README says::

    python -m torch.distributed.launch --nproc_per_node 2 --nnodes 1 --node_rank 0 \\
        --master_addr localhost --master_port PORT flagai_env_trainer_job.py --not_call_launch \\
        --env_type pytorchDDP --out=<folder>

(torch 2's launcher adds ``--local-rank=N``). Each rank writes ``<out>/rank_<r>.json``: the
device, its rank facts, the parsed local rank, the batches it trained, the input mapping it was
given and its final weights.
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from fastcore_train import Trainer  # noqa: E402
from fastcore_train.config import EnvArgs  # noqa: E402
from tests.conformance.harnesses.base import initial_weights, make_data  # noqa: E402
from tests.conformance.harnesses.torch import Harness  # noqa: E402

lr = 0.1
n_epochs = 1
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

env_args = EnvArgs(
    env_type="pytorch",
    experiment_name="flagai-launcher-line",
    batch_size=4,
    num_gpus=1,
    gradient_accumulation_steps=1,
    lr=lr,
    weight_decay=1e-5,
    epochs=n_epochs,
    log_interval=100,
    eval_interval=1000,
    load_dir=None,
    pytorch_device=device,
    save_interval=1000,
    num_checkpoints=1,
)
env_args.add_arg(arg_name="out", default=".")
env_args = env_args.parse_args()

if __name__ == "__main__":
    harness = Harness()
    x, y = make_data(32)
    features = {"features": torch.as_tensor(x), "label": torch.as_tensor(y)}
    loader = torch.utils.data.DataLoader(
        [{name: values[i] for name, values in features.items()} for i in range(len(x))], batch_size=env_args.batch_size)
    model = harness.make_model(initial_weights())
    optimizer = torch.optim.SGD(model.parameters(), lr=env_args.lr)
    mapping = {"features": "x", "label": "y"}  # the user's own argument beside the args' ones
    trainer = Trainer(model, loader, optimizer, **env_args.trainer_args().trainer_kwargs(), input_mapping=mapping,
                      progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)
    comm = trainer.driver.comm
    Path(env_args.out, f"rank_{comm.rank}.json").write_text(json.dumps({
        "device": str(trainer.driver.device), "rank": comm.rank, "world_size": comm.world_size,
        "local_rank": env_args.local_rank, "argv": sys.argv[1:], "batches": trainer.global_forward_batches,
        "weights": {name: value.tolist() for name, value in harness.get_weights(model).items()}}))
