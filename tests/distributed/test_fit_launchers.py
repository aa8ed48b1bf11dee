"""``fastcore-train fit`` runs unchanged under each framework's own launcher (torchrun, paddle's
launcher, mpirun, oneflow's launcher): every rank parses the same config, trains its share of the
shipped digits, and rank 0 writes the checkpoint and the resolved config (issue 16)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.distributed.launchers import BACKENDS, job_environment
from tests.processes import run_process_tree

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits.yaml"
ENTRY = "import sys\nfrom fastcore_train.__main__ import main\nsys.exit(main(sys.argv[1:], prog='fastcore-train'))\n"


@pytest.mark.distributed
def test_fit_runs_under_the_frameworks_launcher(backend_name, tmp_path):
    backend = BACKENDS[backend_name]
    entry = tmp_path / "fit_entry.py"
    entry.write_text(ENTRY)
    out = tmp_path / "out"
    arguments = [str(entry), "fit", "--config", str(EXAMPLE), "--trainer.driver", backend_name,
                 "--trainer.device", "null", "--trainer.n_epochs", "1", "--trainer.progress_bar", "raw",
                 "--output_dir", str(out)]
    completed = run_process_tree(backend.launch(arguments, backend.launcher, 2, tmp_path), 300,
                                 env=job_environment(), cwd=str(tmp_path))
    output = completed.stdout + completed.stderr + backend.launcher_logs(tmp_path)
    assert completed.returncode == 0, output[-4000:]
    # 1437 training rows in batches of 32 over 2 ranks: 23 batches each (jittor's batch_size is the
    # global batch under MPI, split across ranks: 45 batches of 16 each).
    batches = 45 if backend.global_batch_size else 23
    assert f"batch {batches}/{batches}" in output, output[-4000:]
    checkpoint = out / "checkpoint"
    ranks = sorted(path.name for path in checkpoint.glob("rank_state_*"))
    assert ranks == ["rank_state_00000.npz", "rank_state_00001.npz"], ranks  # two ranks trained
    assert yaml.safe_load((out / "config.yaml").read_text())["trainer"]["driver"] == backend_name
