"""Experiment trackers hold exactly what a listener saw, across a stop-and-resume, read back with
each tracker's own reader (the torch env installs the ``trackers`` extra; the trackers are
framework-neutral, so one backend's env tests them)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from fastcore_train import Event, seed_everything
from fastcore_train.callbacks.trackers.mlflow_tracker import MLflowCallback
from tests.conformance.helpers import SaveAndStop, StopRun
from tests.conformance.test_metric_logs import build


def straight_run(harness):
    """An uninterrupted run; the losses and evaluation results a listener recorded, by step."""
    losses: dict[int, float] = {}
    evaluations: dict[int, dict] = {}
    seed_everything(11)
    trainer = build(harness, [])
    trainer.add_callback_fn(Event.on_train_batch_end(), lambda t: losses.__setitem__(
        t.global_forward_batches, float(t.driver.data.to_numeric(t.last_loss))))
    trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, results: evaluations.__setitem__(
        t.global_forward_batches, dict(results)))
    trainer.run(num_eval_sanity_batch=0)
    return losses, evaluations


def stopped_and_resumed(harness, make_tracker, tmp_path):
    """Stop at batch 10 (after a checkpoint), then resume to the end, with a fresh tracker object."""
    seed_everything(11)
    first = make_tracker()
    with pytest.raises(StopRun):
        build(harness, [first, SaveAndStop(10, tmp_path / "ckpt")]).run(num_eval_sanity_batch=0)
    second = make_tracker()
    build(harness, [second]).run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    return first, second


def test_mlflow_holds_the_listener_values_across_stop_and_resume(harness, tmp_path):
    from mlflow.tracking import MlflowClient
    losses, evaluations = straight_run(harness)
    first, second = stopped_and_resumed(
        harness, lambda: MLflowCallback(tmp_path / "logs", log_every_n_batches=1, run_name="digits"), tmp_path)
    assert first.run_id == second.run_id  # the resumed training continued the same run

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'logs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("fastcore_train")
    runs = client.search_runs([experiment.experiment_id])
    assert [run.info.run_id for run in runs] == [first.run_id]
    assert runs[0].info.status == "FINISHED" and runs[0].info.run_name == "digits"
    history = sorted((m.step, m.value) for m in client.get_metric_history(first.run_id, "train/loss"))
    assert history == sorted(losses.items())
    results = sorted((m.step, m.value) for m in client.get_metric_history(first.run_id, "evaluate/acc_acc"))
    assert results == [(step, evaluations[step]["acc#acc"]) for step in sorted(evaluations)]
    np.testing.assert_array_equal([m.step for m in client.get_metric_history(first.run_id, "epoch")],
                                  sorted([*losses, *evaluations]))


def test_report_to_builds_the_named_trackers(tmp_path):
    from fastcore_train.controllers.report_to import report_callbacks
    built = report_callbacks(["csv", "mlflow"], tmp_path, every_n_batches=5, run_name="x")
    assert [type(callback).__name__ for callback in built] == ["CSVLoggerCallback", "MLflowCallback"]
    assert built[1].log_every_n_batches == 5 and built[1].run_name == "x"
    with pytest.raises(ValueError, match="unknown reporter"):
        report_callbacks(["comet"], tmp_path)


def wandb_records(path) -> list[bytes]:
    """The records of a ``.wandb`` file: after a 7-byte header (``:W&B``, magic, version), 32 KiB
    blocks of chunks, each ``crc (4) | length (2, little endian) | type (1: full, 2: first,
    3: middle, 4: last)`` then its bytes (W&B's reader is in its Go core only, so read it here)."""
    import struct
    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    records, pending, position, block = [], b"", 7, 32768
    while position + 7 <= len(data):
        left = block - position % block
        if left < 7:  # too little room for a chunk header: the block is padded
            position += left
            continue
        length, kind = struct.unpack_from("<HB", data, position + 4)
        chunk = data[position + 7:position + 7 + length]
        position += 7 + length
        if kind == 0 and length == 0:
            continue
        pending += chunk
        if kind in (1, 4):
            records.append(pending)
            pending = b""
    return records


def read_wandb_history(folder) -> list[dict]:
    """Every history row of the offline runs under ``folder``, in the order they were written."""
    import json

    from wandb.proto import wandb_internal_pb2
    import time

    def parsed(path):
        records = []
        for data in wandb_records(path):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            records.append(record)
        return records

    rows = []
    for path in sorted(folder.glob("wandb/offline-run-*/run-*.wandb")):
        # wandb's core process may still be writing the file after finish() returned: wait for
        # the run's closing "exit" record
        deadline = time.monotonic() + 60
        records = parsed(path)
        while not any(r.WhichOneof("record_type") == "exit" for r in records):
            assert time.monotonic() < deadline, f"{path} has no exit record"
            time.sleep(0.2)
            records = parsed(path)
        rows += [{item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
                 for r in records if r.WhichOneof("record_type") == "history"]
    return rows


def test_wandb_offline_holds_the_listener_values_across_stop_and_resume(harness, tmp_path):
    from fastcore_train.callbacks.trackers.wandb_tracker import WandbCallback
    losses, evaluations = straight_run(harness)
    first, second = stopped_and_resumed(
        harness, lambda: WandbCallback(tmp_path / "logs", log_every_n_batches=1, run_name="digits"), tmp_path)
    assert first.run_id == second.run_id
    # offline-run-<time>-<run id>, with "-1" added by wandb when the resumed run starts in the same second
    pattern = re.compile(r"offline-run-\d{8}_\d{6}-(?P<id>[a-z0-9]+)(?:-\d+)?$")
    assert {pattern.match(path.name)["id"] for path in (tmp_path / "logs" / "wandb").glob("offline-run-*")} \
        == {first.run_id}
    rows = read_wandb_history(tmp_path / "logs")
    logged_losses = {row["_step"]: row["train/loss"] for row in rows if "train/loss" in row}
    logged_results = {row["_step"]: row["evaluate/acc_acc"] for row in rows if "evaluate/acc_acc" in row}
    assert logged_losses == losses
    assert logged_results == {step: result["acc#acc"] for step, result in evaluations.items()}


def read_swanlab_runs(folder) -> list[list]:
    """The records of each offline SwanLab run file under ``folder`` (in the order the runs
    started), read with SwanLab's own store reader and record type."""
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    runs = []
    for path in sorted(folder.glob("swanlog/run-*/run-*.swanlab")):
        reader = DataStoreReader()
        reader.open(path)
        records = []
        for data in reader:
            record = Record()
            record.ParseFromString(data)
            records.append(record)
        reader.close()
        runs.append(records)
    return runs


def test_swanlab_offline_holds_the_listener_values_across_stop_and_resume(harness, tmp_path):
    from fastcore_train.callbacks.trackers.swanlab_tracker import SwanLabCallback
    losses, evaluations = straight_run(harness)
    first, second = stopped_and_resumed(
        harness, lambda: SwanLabCallback(tmp_path / "logs", log_every_n_batches=1, run_name="digits"), tmp_path)
    assert first.run_id is not None and first.run_id == second.run_id  # the resumed training continued the run

    runs = read_swanlab_runs(tmp_path / "logs")
    assert len(runs) == 2  # one run file per start of the run, both with its id
    starts = [next(r.start for r in records if r.WhichOneof("record_type") == "start") for records in runs]
    assert [(start.id, start.name, start.project) for start in starts] == [(first.run_id, "digits", "fastcore_train")] * 2
    finishes = [[r.finish.state for r in records if r.WhichOneof("record_type") == "finish"] for records in runs]
    from swanlab.proto.swanlab.run.v1.run_pb2 import RunState
    assert finishes == [[RunState.RUN_STATE_CRASHED], [RunState.RUN_STATE_FINISHED]]  # stopped by StopRun, then done

    logged: dict[str, dict[int, float]] = {}
    for records in runs:  # the resumed run's values replace what the interrupted run logged after its checkpoint
        for record in records:
            if record.WhichOneof("record_type") == "scalar":
                logged.setdefault(record.scalar.key, {})[record.scalar.step] = record.scalar.value.number
    assert logged["train/loss"] == losses
    assert logged["evaluate/acc_acc"] == {step: result["acc#acc"] for step, result in evaluations.items()}
    assert sorted(logged["epoch"]) == sorted({*losses, *evaluations})


def test_swanlab_mode_is_checked_and_report_to_names_it(tmp_path):
    from fastcore_train.controllers.report_to import report_callbacks
    from fastcore_train.callbacks.trackers.swanlab_tracker import SwanLabCallback
    with pytest.raises(ValueError, match="mode must be one of offline, local, online"):
        SwanLabCallback(tmp_path, mode="cloud")
    built = report_callbacks(["swanlab"], tmp_path, every_n_batches=3, run_name="x")
    assert [type(callback).__name__ for callback in built] == ["SwanLabCallback"]
    assert (built[0].mode, built[0].log_every_n_batches, built[0].run_name) == ("offline", 3, "x")
