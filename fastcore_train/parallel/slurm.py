"""Rank facts of a job started by SLURM's ``srun``, and the launcher variables made from them.

``srun python train.py`` starts one task per rank and describes each with SLURM's own variables:
``SLURM_PROCID`` (rank), ``SLURM_LOCALID`` (rank on its node), ``SLURM_NTASKS`` (world size),
``SLURM_NODEID``, ``SLURM_JOB_NODELIST`` (compressed, e.g. ``node[01-04,07]``) and
``SLURM_JOB_ID``. None of the frameworks reads them, so :func:`export_env_variables` (run by
``import fastcore_train``) writes the ``env://`` variables torch, oneflow and DeepSpeed read
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``) from them, before any framework is imported; a backend whose launcher uses
other names (paddle) writes its own with :func:`adopt_slurm`.

- The master is the first host of ``SLURM_JOB_NODELIST``; the port is
  ``10000 + SLURM_JOB_ID % 20000`` (every task of a job agrees, jobs sharing a node rarely
  collide, and it stays below Linux's ephemeral range). ``MASTER_ADDR``/``MASTER_PORT``, when
  set, win.
- A launcher's own variables (torchrun, paddle's launcher, mpirun, our self-launch) win over
  SLURM's: ``srun`` starting one launcher per node is a common pattern.
- A process of a SLURM allocation that srun did not start (the ``sbatch`` script itself, an
  ``salloc`` shell, a job named ``bash`` or ``interactive``) is not a rank: its variables are
  ignored, with one info line. A task whose variables contradict each other is an error.
"""
from __future__ import annotations

import logging
import os
import re
from typing import Mapping, MutableMapping, Optional, Sequence

from fastcore_train.parallel.environment import SLURM_EXPORTED_ENV, LaunchEnvironment, RankFacts
#: Job names that mark an interactive allocation (as Lightning reads them): its variables are not a rank's.
INTERACTIVE_JOB_NAMES = ("bash", "interactive")
#: The first port of the range a job's master port is taken from (``PORT_BASE + job_id % PORT_SPAN``).
PORT_BASE = 10000
PORT_SPAN = 20000
#: The ``env://`` variables written from SLURM's (torch's and oneflow's names).
ENV_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")

_log = logging.getLogger("fastcore_train")
_said: set[str] = set()


class SlurmLaunchError(RuntimeError):
    """SLURM's variables describe a task that cannot be one rank of a job (half-launched)."""


# ---------------------------------------------------------------- host lists
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"SLURM host list {text!r} nests brackets.")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"SLURM host list {text!r} closes a bracket it did not open.")
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    if depth:
        raise ValueError(f"SLURM host list {text!r} leaves a bracket open.")
    parts.append(text[start:])
    return parts


def _expand_ranges(inside: str, whole: str) -> list[str]:
    """``01-03,07`` -> ``['01', '02', '03', '07']``: a range keeps its lower bound's zero padding."""
    numbers = []
    for piece in inside.split(","):
        match = _RANGE.match(piece.strip())
        if match is None:
            raise ValueError(f"SLURM host list {whole!r}: {piece!r} is not a number or a range like 01-04.")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise ValueError(f"SLURM host list {whole!r}: the range {piece!r} runs backwards.")
        width = len(low) if low.startswith("0") or len(low) == len(high) else 0
        numbers.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return numbers


def _expand_one(item: str, whole: str) -> list[str]:
    """One host pattern (``rack[1-2]-n[01-02]``): every bracket expanded, in order."""
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    head, tail = item[:open_at], item[close_at + 1:]
    return [head + number + rest for number in _expand_ranges(item[open_at + 1:close_at], whole)
            for rest in _expand_one(tail, whole)]


def expand_hostlist(text: str) -> list[str]:
    """Every host of a SLURM host list, in order: ``node[01-02,07],gpu3`` ->
    ``['node01', 'node02', 'node07', 'gpu3']`` (zero padding kept)."""
    hosts = []
    for item in _split_top_level(text.strip()):
        item = item.strip()
        if not item:
            raise ValueError(f"SLURM host list {text!r} has an empty entry.")
        hosts.extend(_expand_one(item, text))
    return hosts


def expand_tasks_per_node(text: str) -> list[int]:
    """SLURM's tasks-per-node counts, e.g. ``2(x3),1`` -> ``[2, 2, 2, 1]``."""
    counts = []
    for piece in text.split(","):
        match = re.match(r"^\s*(\d+)(?:\(x(\d+)\))?\s*$", piece)
        if match is None:
            raise ValueError(f"SLURM tasks per node {text!r}: {piece!r} is not a count like 2 or 2(x3).")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def master_port_for(job_id: int) -> int:
    """The master port of SLURM job ``job_id``: ``10000 + job_id % 20000``."""
    return PORT_BASE + job_id % PORT_SPAN


# ---------------------------------------------------------------- the environment
def _int(environ: Mapping[str, str], *names: str) -> Optional[int]:
    for name in names:
        text = environ.get(name, "").strip()
        if text:
            if not text.isdigit():
                raise SlurmLaunchError(f"{name}={text!r} is not a number; this srun task's variables are damaged.")
            return int(text)
    return None


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        _log.info(message)


def slurm_facts(environ: Optional[Mapping[str, str]] = None) -> Optional[RankFacts]:
    """This process's rank facts when ``srun`` started it as one task of several, else None.

    Raises :class:`SlurmLaunchError` when SLURM's variables describe a task that cannot be a rank
    (no task count, a rank beyond the world, no host list to find the master in).
    """
    environ = os.environ if environ is None else environ
    job_id = environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")
    rank = _int(environ, "SLURM_PROCID")
    in_step = bool(environ.get("SLURM_STEP_ID") or environ.get("SLURM_STEPID"))
    world_size = _int(environ, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
    if job_id is None and rank is None and world_size is None:
        return None
    if environ.get("SLURM_JOB_NAME") in INTERACTIVE_JOB_NAMES:
        _say_once(f"SLURM job {job_id} is named {environ['SLURM_JOB_NAME']!r} (an interactive allocation): its "
                  "variables are ignored and this process is not a rank of it. Start the ranks with srun from a job "
                  "of another name, or with a framework's launcher.")
        return None
    if not in_step:
        if (world_size or 1) > 1:
            _say_once(f"This process is in SLURM job {job_id} of {world_size} tasks but srun did not start it (no "
                      "SLURM_STEP_ID: the sbatch script or an salloc shell), so it runs as one process. To train on "
                      "every task, start it with `srun python ...`.")
        return None
    if rank is None:
        raise SlurmLaunchError(f"This srun task (job {job_id}, step {environ.get('SLURM_STEP_ID')}) has no "
                               "SLURM_PROCID, so its rank is unknown; start it with srun, which sets it.")
    if world_size is None:
        raise SlurmLaunchError(f"This srun task has SLURM_PROCID={rank} but no task count (SLURM_NTASKS); start "
                               "it with `srun --ntasks N` (or --ntasks-per-node) so every task knows the world size.")
    if world_size < 1 or rank >= world_size:
        raise SlurmLaunchError(f"SLURM_PROCID={rank} is not a rank of a job of SLURM_NTASKS={world_size} tasks; "
                               "the variables were changed after srun set them. Start the job again with srun.")
    if world_size == 1:
        return None
    local_rank = _int(environ, "SLURM_LOCALID")
    node_rank = _int(environ, "SLURM_NODEID")
    if local_rank is None or node_rank is None:
        raise SlurmLaunchError(f"SLURM task {rank} of {world_size} has no SLURM_LOCALID or SLURM_NODEID; srun sets "
                               "both. Start the job with srun.")
    host = environ.get("MASTER_ADDR") or _first_host(environ, rank, world_size)
    port = _int(environ, "MASTER_PORT")
    if port is None:
        if job_id is None or not job_id.isdigit():
            raise SlurmLaunchError(f"SLURM task {rank} of {world_size} has no SLURM_JOB_ID to derive the master "
                                   "port from; set MASTER_PORT to a free port, the same on every task.")
        port = master_port_for(int(job_id))
    return RankFacts(rank=rank, local_rank=local_rank, world_size=world_size, node_rank=node_rank,
                     master_address=f"{host}:{port}", launcher="srun")


def _first_host(environ: Mapping[str, str], rank: int, world_size: int) -> str:
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise SlurmLaunchError(f"SLURM task {rank} of {world_size} has no SLURM_JOB_NODELIST to find the master "
                               "host in; set MASTER_ADDR to the first node's address.")
    try:
        return expand_hostlist(nodelist)[0]
    except ValueError as error:
        raise SlurmLaunchError(f"{error} Set MASTER_ADDR to the first node's address.") from error


def local_world_size(environ: Mapping[str, str], facts: RankFacts) -> int:
    """How many tasks of the job run on this task's node (for sharing its cores)."""
    for name in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        if environ.get(name):
            try:
                counts = expand_tasks_per_node(environ[name])
            except ValueError:
                break
            if facts.node_rank < len(counts):
                return counts[facts.node_rank]
    per_node = _int(environ, "SLURM_NTASKS_PER_NODE")
    return per_node or facts.world_size


def env_variables(facts: RankFacts, local_size: int) -> dict[str, str]:
    """The ``env://`` variables (torch's, oneflow's and DeepSpeed's names) of ``facts``."""
    host, port = str(facts.master_address).rsplit(":", 1)
    return {"RANK": str(facts.rank), "WORLD_SIZE": str(facts.world_size), "LOCAL_RANK": str(facts.local_rank),
            "LOCAL_WORLD_SIZE": str(local_size), "GROUP_RANK": str(facts.node_rank), "MASTER_ADDR": host,
            "MASTER_PORT": port, SLURM_EXPORTED_ENV: str(facts.rank)}


def launched_by_other(environments: Sequence[LaunchEnvironment], environ: Mapping[str, str]) -> bool:
    """Whether a launcher other than srun (torchrun, paddle's, mpirun, our self-launch) started this process."""
    return any(environment.detect(environ) is not None and SLURM_EXPORTED_ENV not in environ
               for environment in environments)


def export_env_variables(environments: Sequence[LaunchEnvironment],
                         environ: MutableMapping[str, str] = os.environ) -> Optional[RankFacts]:
    """Under srun (several tasks, no other launcher among ``environments``), write the ``env://``
    variables from SLURM's and return the facts; else None. A half-launched task is left alone
    here (the error comes when a Trainer asks, not at import)."""
    if SLURM_EXPORTED_ENV in environ or launched_by_other(environments, environ):
        return None
    try:
        facts = slurm_facts(environ)
    except SlurmLaunchError:
        return None
    if facts is not None:
        environ.update(env_variables(facts, local_world_size(environ, facts)))
    return facts


def adopt_slurm(variables: Mapping[str, str], environ: MutableMapping[str, str] = os.environ) -> None:
    """Write a backend launcher's ``variables`` (made from :func:`slurm_facts`) into ``environ``,
    keeping any the user set."""
    for name, value in variables.items():
        environ.setdefault(name, value)


def refuse_slurm_only(framework: str, remedy: str, environ: Optional[Mapping[str, str]] = None) -> None:
    """Raise when srun started this process as one of several tasks but ``framework`` cannot take
    its rank from SLURM's variables (``remedy`` says what to run instead)."""
    facts = slurm_facts(environ)
    if facts is not None:
        raise SlurmLaunchError(f"srun started this process as task {facts.rank} of {facts.world_size}, but "
                               f"{framework} cannot take its rank from SLURM's variables: {remedy}")


def task_hosts(environ: Mapping[str, str], facts: RankFacts) -> list[str]:
    """Each task's host, rank by rank, for launchers that list every rank's endpoint (paddle's):
    srun's default block distribution over the step's nodes; the master's host for every task
    when the node list or the counts are missing or disagree."""
    host = str(facts.master_address).rsplit(":", 1)[0]
    try:
        nodes = expand_hostlist(environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or "")
        counts = expand_tasks_per_node(environ.get("SLURM_STEP_TASKS_PER_NODE")
                                       or environ.get("SLURM_TASKS_PER_NODE") or "")
    except ValueError:
        return [host] * facts.world_size
    hosts = [node for node, count in zip(nodes, counts) for _ in range(count)]
    return hosts if len(hosts) == facts.world_size and len(nodes) == len(counts) else [host] * facts.world_size


def launched_or_slurm(environment: LaunchEnvironment,
                      environ: MutableMapping[str, str] = os.environ) -> Optional[RankFacts]:
    """``environment``'s rank facts (its launcher's variables win), else srun's: then the
    ``env://`` variables are written from SLURM's (when :func:`export_env_variables` did not run)."""
    facts = environment.detect(environ)
    if facts is not None:
        return facts
    facts = slurm_facts(environ)
    if facts is not None:
        environ.update(env_variables(facts, local_world_size(environ, facts)))
    return facts
