"""A host lost under mpirun (jittor, issue 39): test_host_lost.py's job and cut, the two hosts' ranks started by
one mpirun with a hostfile (test_two_hosts_mpirun_slurm.py's command). jittor's MPI all-reduce waits for the lost
host holding Python's GIL, so node0's rank is stopped by its watcher process (parallel/hang_report.py), with the
report naming node1's address and rank; mpirun itself waits on for its daemon on the lost node (PRRTE), so the
test ends it, as a user would. Then a restart on node0 alone (two ranks) ends with the uninterrupted run's weights.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.distributed import two_hosts
from tests.distributed.test_host_lost import HOLD_AT, JOB, TIMEOUT, environment, wait_for, weights
from tests.distributed.test_two_hosts_mpirun_slurm import AGENT, mpirun_environment

pytestmark = pytest.mark.distributed


def ranks_on(host: two_hosts.Host) -> list[str]:
    """The job's ranks alive on ``host`` (not the helper processes a rank forks, which have its command line)."""
    found = subprocess.run(["ip", "netns", "pids", host.namespace], capture_output=True, text=True).stdout.split()
    jobs = {}
    for pid in found:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            argv = Path(f"/proc/{pid}/cmdline").read_text(errors="replace").split("\0")
            if stat[0] != "Z" and Path(argv[0]).name.startswith("python") and str(JOB) in argv:  # not mpirun
                jobs[pid] = stat[1]
        except OSError:
            pass
    return [pid for pid, parent in jobs.items() if parent not in jobs]


def alive(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_host_lost_under_mpirun_stops_node0s_rank_naming_it_and_a_restart_ends_with_the_same_weights(
        backend_name, tmp_path):
    if backend_name != "jittor":
        pytest.skip("mpirun with a hostfile is how jittor's ranks span hosts (test_host_lost.py: the others)")
    reason = two_hosts.unavailable() or (None if shutil.which("mpirun") else "no mpirun on PATH")
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "lost"
    out.mkdir()
    with two_hosts.two_hosts() as (node0, node1):
        hostfile = tmp_path / "hosts"
        hostfile.write_text(f"{node0.address} slots=1\n{node1.address} slots=1\n")
        job = [sys.executable, str(JOB), str(out), "jittor", str(TIMEOUT), str(HOLD_AT)]
        mpirun = subprocess.Popen(node0.command(["mpirun", "-np", "2", "--hostfile", str(hostfile), "--mca",
                                                 "plm_rsh_agent", str(AGENT), "-x", "PATH", "-x", "OMP_NUM_THREADS=1",
                                                 "--bind-to", "none", *job]),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=mpirun_environment(),
                                  cwd=tmp_path, start_new_session=True)
        try:
            wait_for([out / "held_0", out / "held_1"], [mpirun], 240)
            rank = ranks_on(node0)  # found before the cut: the helpers a rank forks outlive it (reparented)
            assert len(rank) == 1, rank
            node1.set_link(False)
            (out / "release").write_text("")
            released = time.monotonic()
            while alive(rank[0]) and time.monotonic() - released < TIMEOUT + 60:
                time.sleep(0.1)
            seconds = time.monotonic() - released
        finally:
            node0.kill_everything()  # mpirun waits on for its daemon on the lost node
            node1.kill_everything()
            output = mpirun.communicate(timeout=60)[0]
        assert seconds < TIMEOUT + 8, f"node0's rank stopped {seconds:.1f} s after the cut: {output[-3000:]}"
        assert "[rank 0] collective timeout" in output, output[-3000:]
        assert re.search(rf"Lost: host {re.escape(node1.address)} (\(\S+\) )?\(rank 1\)", output), output[-3000:]
        print(f"node0's rank stopped {seconds:.1f} s after the cut:\n" + output[output.index("[rank 0] coll"):][:1500])

        straight = tmp_path / "straight"
        straight.mkdir()
        runs = [subprocess.Popen(node0.command(["mpirun", "-np", "2", "--bind-to", "none", sys.executable, str(JOB),
                                                str(folder), "jittor", str(TIMEOUT)]),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment(),
                                 cwd=tmp_path, start_new_session=True) for folder in (out, straight)]
        ends = []
        for run in runs:
            try:
                ends.append((run.wait(timeout=240), run.communicate()[0]))
            except subprocess.TimeoutExpired:
                node0.kill_everything()
                ends.append((-9, run.communicate()[0]))
    for code, text in ends:
        assert code == 0, text[-3000:]
    assert f"resumed at batch {HOLD_AT - 2}" in ends[0][1], ends[0][1][-3000:]
    for rank in (0, 1):
        for name, value in weights(straight, rank).items():
            np.testing.assert_array_equal(weights(out, rank)[name], value, err_msg=name)
