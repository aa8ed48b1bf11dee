"""Preemption: a run killed with SIGKILL at a random batch, started again with the same command and
``resume_from="auto"``, ends exactly where an uninterrupted run ends."""
from __future__ import annotations

import logging
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fastcore_train import REQUEUE_EXIT_CODE, CheckpointCallback, get_last_checkpoint, seed_everything
from tests.conformance.helpers import assert_weights_equal
from tests.conformance.test_resume import build_run

ROOT = Path(__file__).resolve().parents[2]

# One command for every start: it resumes from the newest checkpoint when there is one. With
# KILL_AT, it kills itself (SIGKILL, no clean-up) after that batch, once (a marker file remembers);
# with HOW "usr1" it sends itself SIGUSR1 instead, its CheckpointCallback's requeue signal.
PREEMPTIBLE = textwrap.dedent("""\
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    import numpy as np
    from fastcore_train import CheckpointCallback, Event, seed_everything
    from tests.conformance.harnesses.{backend} import Harness
    from tests.conformance.test_resume import build_run

    out, kill_at, how = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    harness = Harness()
    seed_everything(5)
    trainer, model = build_run(harness, 0, {{}}, n_epochs=2, callbacks=[
        CheckpointCallback(out / "checkpoints", every_n_batches=3, save_object="checkpoint",
                           requeue_signal=signal.SIGUSR1)])

    def preempt(t):
        marker = out / "killed"
        if t.global_forward_batches == kill_at and not marker.exists():
            marker.write_text(str(kill_at))
            os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGUSR1)

    trainer.add_callback_fn(Event.on_train_batch_end(), preempt)
    trainer.run(num_eval_sanity_batch=0, resume_from="auto")
    np.savez(out / "weights.npz", **harness.get_weights(model))
""")


def start(harness, out: Path, kill_at: int, how: str = "kill") -> subprocess.CompletedProcess:
    script = PREEMPTIBLE.format(root=str(ROOT), backend=harness.driver_name)
    return subprocess.run([sys.executable, "-c", script, str(out), str(kill_at), how], capture_output=True,
                          text=True, timeout=600)


def test_a_killed_or_requeue_signalled_run_started_again_with_resume_auto_ends_bit_identical(harness, tmp_path):
    straight = tmp_path / "straight"
    straight.mkdir()
    done = start(harness, straight, kill_at=-1)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "no complete checkpoint" in done.stderr and "starting a fresh run" in done.stderr

    preempted = tmp_path / "preempted"
    preempted.mkdir()
    kill_at = random.randint(3, 15)  # of 16 batches (8 an epoch), checkpoints every 3: at any batch
    killed = start(harness, preempted, kill_at=kill_at)
    assert killed.returncode == -signal.SIGKILL, (kill_at, killed.stderr[-4000:])
    assert not (preempted / "weights.npz").exists()
    resumed = start(harness, preempted, kill_at=kill_at)  # the same command
    assert resumed.returncode == 0, (kill_at, resumed.stderr[-4000:])
    assert "resuming from" in resumed.stderr and f"after {kill_at // 3 * 3} batches" in resumed.stderr, kill_at
    assert_weights_equal(dict(np.load(preempted / "weights.npz")), dict(np.load(straight / "weights.npz")))

    # The requeue signal in one process: a checkpoint after that very batch, the requeue status, then the same.
    signalled = tmp_path / "signalled"
    signalled.mkdir()
    stopped = start(harness, signalled, kill_at=kill_at, how="usr1")
    assert stopped.returncode == REQUEUE_EXIT_CODE, (kill_at, stopped.stderr[-4000:])
    assert get_last_checkpoint(signalled / "checkpoints").name.endswith(f"-batch_{kill_at}"), kill_at
    resumed = start(harness, signalled, kill_at=kill_at, how="usr1")
    assert resumed.returncode == 0 and f"after {kill_at} batches" in resumed.stderr, (kill_at, resumed.stderr[-4000:])
    assert_weights_equal(dict(np.load(signalled / "weights.npz")), dict(np.load(straight / "weights.npz")))


def test_resume_auto_without_a_checkpoint_starts_fresh_and_says_so(harness, tmp_path, caplog):
    seed_everything(5)
    callback = CheckpointCallback(tmp_path / "none_yet", every_n_batches=100, save_object="checkpoint")
    trainer, model = build_run(harness, 0, {}, n_epochs=1, callbacks=[callback])
    with caplog.at_level(logging.INFO, logger="fastcore_train"):
        trainer.run(num_eval_sanity_batch=0, resume_from="auto")
    lines = [record.getMessage() for record in caplog.records if "resume_from='auto'" in record.getMessage()]
    assert len(lines) == 1 and "starting a fresh run" in lines[0] and "none_yet" in lines[0]
    assert trainer.global_forward_batches == 8
    seed_everything(5)
    plain, plain_model = build_run(harness, 0, {}, n_epochs=1)
    plain.run(num_eval_sanity_batch=0)
    assert_weights_equal(harness.get_weights(model), harness.get_weights(plain_model))


def test_newest_by_batches_and_damaged_ones_are_passed_over(harness, tmp_path):
    seed_everything(5)
    trainer, _ = build_run(harness, 0, {}, n_epochs=1, callbacks=[
        CheckpointCallback(tmp_path / "ckpts", every_n_batches=3, save_object="checkpoint")])
    trainer.run(num_eval_sanity_batch=0)
    run_folder = next((tmp_path / "ckpts").iterdir())
    assert get_last_checkpoint(tmp_path / "ckpts").name == "epoch_1-batch_6"
    # an older checkpoint touched later does not win; a damaged newest one is passed over
    (run_folder / "epoch_1-batch_3" / "trainer_state.json").touch()
    model_file = next(p for p in (run_folder / "epoch_1-batch_6").iterdir() if p.name.startswith("model"))
    target = model_file if model_file.is_file() else next(p for p in model_file.rglob("*") if p.is_file())
    target.write_bytes(target.read_bytes()[:-1] + bytes([target.read_bytes()[-1] ^ 1]))
    assert get_last_checkpoint(tmp_path / "ckpts").name == "epoch_1-batch_3"
    assert get_last_checkpoint(tmp_path / "elsewhere") is None


def test_resume_auto_needs_a_checkpoint_folder_to_search(harness, tmp_path):
    trainer, _ = build_run(harness, 0, {}, n_epochs=1)
    with pytest.raises(ValueError, match=r"CheckpointCallback\(save_object='checkpoint'\).*auto:<folder>"):
        trainer.run(num_eval_sanity_batch=0, resume_from="auto")


def test_resume_auto_from_a_missing_folder_warns_naming_it_and_an_empty_one_says_info(harness, tmp_path, caplog):
    seed_everything(5)
    trainer, _ = build_run(harness, 0, {}, n_epochs=1)
    missing, empty = tmp_path / "first_start", tmp_path / "empty"
    empty.mkdir()
    with caplog.at_level(logging.INFO, logger="fastcore_train"):
        trainer.run(num_eval_sanity_batch=0, resume_from=f"auto:{missing}")
        trainer.run(num_eval_sanity_batch=0, resume_from=f"auto:{empty}")
    records = [record for record in caplog.records if "resume_from='auto:" in record.getMessage()]
    assert [record.levelname for record in records] == ["WARNING", "INFO"]
    assert str(missing) in records[0].getMessage() and "does not exist" in records[0].getMessage()
    assert "no complete checkpoint" in records[1].getMessage() and str(empty) in records[1].getMessage()
