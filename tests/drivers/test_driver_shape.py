"""The shape the redesign promises: a narrow Driver and the same module set in every backend.

Read statically (no framework imported), so the core env checks it."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from fastcore_train.drivers import Collectives, DataAdapter, Driver, Persistence

BACKENDS = Path(__file__).resolve().parents[2] / "fastcore_train" / "backends"
ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
# Modules only one backend has, for what only it has (torch's sharding drivers, paddle's model
# parallel, jittor's loader workers).
OWN_MODULES = {"torch": {"fairscale_driver.py", "torch_fsdp_driver.py", "deepspeed_driver.py",
                         "torch_model_parallel_driver.py", "sharded_state.py", "meta_init.py", "job_store.py"},
               "paddle": {"model_parallel_driver.py"},
               "jittor": {"batch_workers.py"}}


def test_driver_keeps_at_most_25_public_members():
    methods = {name for name in dir(Driver) if not name.startswith("_")}
    attributes = set(re.findall(r"^\s+self\.([a-z]\w*)\s*[:=]", inspect.getsource(Driver.__init__), flags=re.M))
    assert {"comm", "data", "io", "precision", "launcher"} <= attributes
    assert len(methods | attributes) <= 25, sorted(methods | attributes)


def test_the_parts_of_a_driver_are_separate_classes():
    driver_members = set(dir(Driver))
    for part, member in ((Collectives, "barrier"), (DataAdapter, "move"), (Persistence, "save_model")):
        assert member in dir(part) and member not in driver_members


def test_every_backend_has_the_module_set_the_architecture_page_lists():
    documented = set(re.findall(r"^\s*\| `(\w+\.py)` \|", ARCHITECTURE.read_text(), flags=re.M))
    assert {"single_driver.py", "parallel_driver.py", "persistence.py", "dataloader.py"} <= documented
    for backend in ("torch", "paddle", "jittor", "oneflow"):
        modules = {path.name for path in (BACKENDS / backend).glob("*.py")} - OWN_MODULES.get(backend, set())
        assert modules == documented, (backend, sorted(modules ^ documented))
