"""The Trainer's copy of a jittor Dataset loads its batches in the dataset's ``num_workers`` worker
processes: in the sampler's order (the same batches and weights as without workers), and every way
of leaving an epoch stops them (no hang, no process left behind)."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from jittor.dataset import Dataset

from fastcore_train import Callback, Evaluator, Trainer
from fastcore_train.backends.jittor import JittorSingleDriver
from fastcore_train.backends.jittor.batch_workers import WorkerError
from fastcore_train.backends.jittor.dataloader import SampledDataset
from fastcore_train.samplers.adapt import make_reproducible_dataloader
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.harnesses.jittor import Harness
from tests.conformance.helpers import SaveAndStop, StopRun, assert_weights_equal
from tests.processes import read_line, run_process_tree, wait_until

HARNESS = Harness()
ROOT = Path(__file__).resolve().parents[3]
X, Y = make_data(40)


class Samples(Dataset):
    """``{"x", "y", "idx", "pid"}`` samples of (X, Y): which sample, and which process loaded it;
    raises at index ``fail_at``."""

    def __init__(self, num_workers: int, fail_at: int = -1, batch_size: int = 4, shuffle: bool = True,
                 die_at: int = -1) -> None:
        super().__init__()
        self.fail_at, self.die_at = fail_at, die_at
        self.set_attrs(total_len=len(X), batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)

    def __getitem__(self, index):
        if index == self.fail_at:
            raise ValueError(f"cannot read sample {index}")
        if index == self.die_at:
            os._exit(3)
        return {"x": X[index], "y": Y[index], "idx": np.int64(index), "pid": np.int64(os.getpid())}


class Model(type(HARNESS.make_model(initial_weights()))):
    def train_step(self, x, y, idx, pid):
        return super().train_step(x, y)


class Seen(Callback):
    """The sample indices of every trained batch, and the processes that loaded them."""

    def __init__(self) -> None:
        self.batches, self.pids = [], set()

    def on_train_batch_begin(self, trainer, batch, indices):
        self.batches.append(batch["idx"].numpy().tolist())
        self.pids.update(batch["pid"].numpy().tolist())


class StopAt(Callback):
    """Ends the run after global batch ``at``: by an exception, Ctrl-C or ``stop_training()``."""

    def __init__(self, how: str) -> None:
        self.how, self.at = how, None

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches != self.at:
            return
        if self.how == "stop_training":
            trainer.stop_training()
        else:
            raise StopRun(self.at) if self.how == "exception" else KeyboardInterrupt()


def loader_workers() -> list:
    return [p for p in multiprocessing.active_children() if p.name.startswith("fastcore-jittor-loader")]


def trainer(num_workers: int, *callbacks, n_epochs: int = 2, **dataset) -> tuple[Trainer, Seen, Model]:
    model = Model(initial_weights(), 0.0)
    seen = Seen()
    built = Trainer(model, Samples(num_workers, **dataset), HARNESS.make_sgd(model, 0.1), driver="jittor", device="cpu",
                    n_epochs=n_epochs, progress_bar=None, callbacks=[seen, *callbacks], model_summary=False)
    return built, seen, model


@pytest.fixture(scope="module")
def without_workers():
    """Two epochs trained with the samples read in this process: the batches and the weights."""
    built, seen, model = trainer(0)
    built.run(num_eval_sanity_batch=0)
    return seen.batches, HARNESS.get_weights(model)


def test_the_copy_loads_in_workers_in_the_samplers_order_and_keeps_them_between_epochs():
    driver = JittorSingleDriver(HARNESS.make_model(initial_weights()))
    copy = make_reproducible_dataloader(driver, Samples(2), seed=3)
    expected = [batch["idx"].numpy().tolist() for batch in make_reproducible_dataloader(driver, Samples(0), seed=3)]
    assert isinstance(copy, SampledDataset) and copy.num_workers == 2
    for _ in range(2):
        batches = list(copy)
        assert [batch["idx"].numpy().tolist() for batch in batches] == expected
        pids = {pid for batch in batches for pid in batch["pid"].numpy().tolist()}
        assert pids == set(copy._workers.pids) and os.getpid() not in pids and len(pids) == 2
    copy.close()
    assert loader_workers() == []


def test_training_with_workers_is_the_same_as_without(without_workers):
    built, seen, model = trainer(2)
    built.run(num_eval_sanity_batch=0)
    assert seen.batches == without_workers[0] and len(seen.pids) == 2 and os.getpid() not in seen.pids
    assert_weights_equal(HARNESS.get_weights(model), without_workers[1])
    assert loader_workers() == [], "run() stops the workers when it ends"


def test_abandoned_epochs_then_a_fresh_run_continue_where_they_stopped(without_workers):
    built, seen, model = trainer(2)
    built.run(num_eval_sanity_batch=0, num_train_batch_per_epoch=3)  # each epoch left after 3 of 10 batches
    assert seen.batches == without_workers[0][:3] + without_workers[0][10:13]
    assert loader_workers() == []
    again, seen, _ = trainer(2, n_epochs=1)
    again.run(num_eval_sanity_batch=0)
    iterator = iter(again.dataloader)  # an epoch begun, then another one before it is over
    next(iterator)
    assert [batch["idx"].numpy().tolist() for batch in again.dataloader] == without_workers[0][:10]
    with pytest.raises(RuntimeError, match="abandoned"):
        next(iterator)
    again.dataloader.close()
    assert loader_workers() == []


@pytest.mark.parametrize("how", ["exception", "KeyboardInterrupt", "stop_training"])
def test_stopping_midway_many_times_leaves_nothing_running_and_the_next_run_continues(without_workers, how):
    stopper = StopAt(how)
    built, seen, model = trainer(2, stopper)
    for at in (2, 5, 9, 12, 16):  # mid-epoch, some with requests still being loaded
        stopper.at = at
        if how == "exception":
            with pytest.raises(StopRun):
                built.run(num_eval_sanity_batch=0)
        else:
            built.run(num_eval_sanity_batch=0)
        assert built.global_forward_batches == at and loader_workers() == []
    stopper.at = None
    built.run(num_eval_sanity_batch=0)
    assert seen.batches == without_workers[0] and loader_workers() == []
    assert_weights_equal(HARNESS.get_weights(model), without_workers[1])


def test_a_checkpoint_mid_epoch_resumes_at_the_same_sample(without_workers, tmp_path):
    built, _, _ = trainer(2, SaveAndStop(13, tmp_path / "ckpt"))
    with pytest.raises(StopRun):
        built.run(num_eval_sanity_batch=0)
    resumed, seen, model = trainer(2)
    resumed.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    assert seen.batches == without_workers[0][13:]
    assert_weights_equal(HARNESS.get_weights(model), without_workers[1])
    assert loader_workers() == []


def test_a_workers_exception_names_the_sample_and_a_dead_worker_is_named_and_both_stop_the_workers():
    built, _, _ = trainer(2, fail_at=17)
    with pytest.raises(ValueError, match=r"(?s)worker \d failed on sample 17 .*ValueError: cannot read sample 17"):
        built.run(num_eval_sanity_batch=0)
    assert loader_workers() == []
    built, _, _ = trainer(2, die_at=17)
    with pytest.raises(WorkerError, match=r"worker \d \(pid \d+\) exited with code 3 while loading batch"):
        built.run(num_eval_sanity_batch=0)
    assert loader_workers() == []


def live_children() -> set[int]:
    """The processes this one started that are still there (zombies left out), read from /proc."""
    pids: set[int] = set()
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children") as children:
                pids.update(int(pid) for pid in children.read().split())
        except FileNotFoundError:  # the thread ended meanwhile
            pass

    def running(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().split(") ")[1][0] != "Z"
        except FileNotFoundError:
            return False
    return {pid for pid in pids if running(pid)}


class Served:
    """An ``evaluate_batch_step_fn`` noting each evaluated batch's samples and the processes that
    loaded them; at an evaluation's first batch, that those processes are children of this one."""

    def __init__(self) -> None:
        self.batches: list = []
        self.pids: set = set()

    def __call__(self, evaluator, batch) -> None:
        pids = set(batch["pid"].numpy().tolist())
        if not self.batches:
            assert pids <= live_children(), "the workers show as children of this process"
        self.batches.append(batch["idx"].numpy().tolist())
        self.pids |= pids

    def take(self) -> tuple[list, set]:
        taken = self.batches, self.pids
        self.batches, self.pids = [], set()
        return taken


IN_ORDER = [list(range(start, start + 4)) for start in range(0, 40, 4)]


def test_the_evaluation_loaders_workers_stop_when_run_ends_and_start_again_with_the_next_run():
    model, served = Model(initial_weights(), 0.0), Served()
    built = Trainer(model, Samples(0), HARNESS.make_sgd(model, 0.1), driver="jittor", device="cpu", n_epochs=2,
                    evaluate_dataloaders=Samples(2), evaluate_batch_step_fn=served, progress_bar=None,
                    model_summary=False)
    built.run(num_eval_sanity_batch=0)
    batches, first = served.take()
    assert batches == IN_ORDER * 2, "two evaluations, each of every sample in dataset order"
    assert len(first) == 2 and os.getpid() not in first, "loaded by two workers, kept from one evaluation to the next"
    assert not first & live_children(), "run() stopped the evaluation loader's workers"
    built.run(num_eval_sanity_batch=-1)  # nothing left to train: the evaluation before training only
    batches, second = served.take()
    assert batches == IN_ORDER and len(second) == 2 and not second & first, "new workers served it"
    assert not second & live_children()


def test_a_standalone_evaluators_workers_stop_when_its_run_ends_and_start_again():
    served = Served()
    evaluator = Evaluator(Model(initial_weights(), 0.0), Samples(2), driver="jittor", device="cpu",
                          evaluate_batch_step_fn=served, verbose=0)
    evaluator.run()
    batches, first = served.take()
    assert batches == IN_ORDER and len(first) == 2 and os.getpid() not in first
    assert not first & live_children(), "Evaluator.run() stopped its loader's workers"
    evaluator.run()
    batches, second = served.take()
    assert batches == IN_ORDER and len(second) == 2 and not second & first
    assert not second & live_children()


EVALUATING = """
import sys
sys.path.insert(0, {root!r})
from tests.backends.jittor.test_loader_workers import HARNESS, Model, Samples, Served
from tests.conformance.harnesses.base import initial_weights
from fastcore_train import Trainer
model = Model(initial_weights(), 0.0)
Trainer(model, Samples(0), HARNESS.make_sgd(model, 0.1), driver="jittor", device="cpu", n_epochs=1,
        evaluate_dataloaders=Samples(2), evaluate_batch_step_fn=Served(), progress_bar=None,
        model_summary=False).run(num_eval_sanity_batch=0)
print("trained", flush=True)
"""


def test_a_script_that_evaluated_with_workers_exits():
    # jittor's own workers, forked while run()'s SIGTERM handler was set, only noted the SIGTERM that
    # multiprocessing sends its daemons at exit, which then waited for them for good
    done = run_process_tree([sys.executable, "-c", EVALUATING.format(root=str(ROOT))], timeout=120)
    assert done.returncode == 0 and "trained" in done.stdout, done.stderr[-3000:]
    assert "SIGTERM received" not in done.stderr


EXITING = """
import os, sys, time
sys.path.insert(0, {root!r})
from tests.backends.jittor.test_loader_workers import trainer
built, _, _ = trainer(2, n_epochs=1)
iterator = iter(built.dataloader)
next(iterator)
print(*built.dataloader._workers.pids, flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)  # an epoch still open
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["exit", "SIGKILL"])
def test_the_workers_end_with_the_training_process(how):
    script = EXITING.format(root=str(ROOT))
    job = subprocess.Popen([sys.executable, "-c", script, how], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in read_line(job.stdout, 120).split()]
        assert len(pids) == 2
        if how == "SIGKILL":  # no clean-up runs in the training process
            job.send_signal(signal.SIGKILL)
        assert job.wait(60) in (0, -signal.SIGKILL)
    finally:
        job.kill()
        job.wait()

    def gone() -> bool:
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    if stat.read().split(") ")[1][0] != "Z":
                        return False
            except FileNotFoundError:
                pass
        return True

    started = time.monotonic()
    wait_until(gone, 10, "the loader workers' exit")
    assert time.monotonic() - started < 5


def two_rank_body(config: dict) -> dict:
    """On each rank: the batches of two epochs without workers, with them, and with each epoch left
    after 2 batches; the processes that loaded them and the loader workers left afterwards."""
    import jittor as jt

    def batches_seen(num_workers: int, evaluate: bool = False, **run) -> tuple[list, set]:
        model = Model(initial_weights(), 0.0)
        seen = Seen()
        Trainer(model, Samples(num_workers), HARNESS.make_sgd(model, 0.1), driver="jittor", device=None, n_epochs=2,
                progress_bar=None, callbacks=[seen], model_summary=False,
                **(dict(evaluate_dataloaders=Samples(2), evaluate_batch_step_fn=served) if evaluate else {}),
                ).run(num_eval_sanity_batch=0, **run)
        return seen.batches, seen.pids

    served = Served()
    plain, _ = batches_seen(0)
    loaded, pids = batches_seen(2, evaluate=True)
    evaluated, evaluation_pids = served.take()
    abandoned, _ = batches_seen(2, num_train_batch_per_epoch=2)
    return {"rank": jt.rank, "plain": plain, "loaded": loaded, "abandoned": abandoned, "pid": os.getpid(),
            "pids": sorted(pids), "left": [p.pid for p in loader_workers()], "evaluated": evaluated,
            "evaluation_pids": sorted(evaluation_pids), "evaluation_left": sorted(evaluation_pids & live_children())}


@pytest.mark.distributed
def test_two_mpi_ranks_each_load_their_share_in_workers(rank_pool):
    from tests.distributed.launchers import run_pooled

    ranks = sorted(run_pooled(rank_pool, two_rank_body, {}), key=lambda report: report["rank"])
    assert [report["rank"] for report in ranks] == [0, 1]
    for report in ranks:
        assert report["loaded"] == report["plain"] and report["left"] == []
        assert len(report["pids"]) == 2 and report["pid"] not in report["pids"]
        per_epoch = len(report["plain"]) // 2
        assert report["abandoned"] == report["plain"][:2] + report["plain"][per_epoch:per_epoch + 2]
        # each rank evaluated its share twice (two epochs) in two workers of its own, stopped when run() ended
        half = len(report["evaluated"]) // 2
        assert report["evaluated"][:half] == report["evaluated"][half:]
        assert len(report["evaluation_pids"]) == 2 and report["pid"] not in report["evaluation_pids"]
        assert report["evaluation_left"] == []
    shares = [sum(report["evaluated"][:len(report["evaluated"]) // 2], []) for report in ranks]
    assert sorted(shares[0] + shares[1]) == list(range(40)) and not set(shares[0]) & set(shares[1])
    first_epoch = [sorted(sum(report["plain"][:len(report["plain"]) // 2], [])) for report in ranks]
    assert not set(first_epoch[0]) & set(first_epoch[1]) and sorted(first_epoch[0] + first_epoch[1]) == list(range(40))
