"""A notebook_launcher payload (the pickled function and its arguments, which each rank unpickles and
runs) is private to its user: the job folder is mode 0700, so no other user can read or replace it
(docs/security.md)."""
from __future__ import annotations

import os
import stat

from fastcore_train.parallel.function_launch import run_on_ranks
from fastcore_train.parallel.rank_errors import FUNCTION_JOB_ENV


def job_folder_mode() -> tuple[int, int]:
    folder = os.environ[FUNCTION_JOB_ENV]
    return stat.S_IMODE(os.stat(folder).st_mode), os.stat(folder).st_uid


def test_the_payload_folder_is_private_to_its_user():
    mode, owner = run_on_ranks(job_folder_mode, (), [{}])
    assert mode == 0o700, oct(mode)
    assert owner == os.getuid()
