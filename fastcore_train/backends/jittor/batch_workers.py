"""Worker processes that load the batches of a batch sampler for a jittor Dataset.

A jittor Dataset's own workers read one flat index list per epoch, split across MPI ranks by
jittor, and cannot take a batch sampler ("Batch sampler not support yet"). The Trainer's copy of
the dataset draws from its resumable batch sampler instead, so it brings the dataset's
``num_workers`` back with this small pool: each worker is forked from the training process (as
jittor forks its own), prepared for jittor as jittor prepares its workers, and turns a list of
indices into a collated numpy batch; the training process converts it with ``to_jittor``.
At most ``2 * num_workers`` batches are in flight, in the sampler's order.
"""
from __future__ import annotations

import collections
import itertools
import multiprocessing
import weakref
from typing import Any, Iterable, Iterator, Optional

import jittor as jt

#: Batches requested ahead of the one being trained on, per worker (torch's default prefetch).
PREFETCH_PER_WORKER = 2

_worker_dataset: Any = None  # the dataset, in a worker process (inherited through fork)


def _start_worker(dataset: Any, counter: Any, base_seed: int) -> None:
    """Runs once in each new worker: jittor's subprocess set-up, a seed of its own, the dataset."""
    global _worker_dataset
    import jittor_utils

    with counter.get_lock():
        worker_id = counter.value
        counter.value += 1
    jt.flags.use_cuda_host_allocator = 0
    jittor_utils.cc.init_subprocess()
    jt.jt_init_subprocess()
    jt.set_global_seed((base_seed + 7919 * (worker_id + 1)) & 0x7FFFFFFF)
    jt.flags.use_parallel_op_compiler = 0
    _worker_dataset = dataset


def _load_batch(indices: list[int]) -> Any:
    dataset = _worker_dataset
    return dataset.collate_batch([dataset[index] for index in indices])


class BatchWorkers:
    """``num_workers`` forked processes loading ``dataset``'s batches; closed with the owner."""

    def __init__(self, dataset: Any, num_workers: int) -> None:
        context = multiprocessing.get_context("fork")
        jt.sync_all()  # nothing pending crosses the fork
        self._pool = context.Pool(num_workers, initializer=_start_worker,
                                  initargs=(dataset, context.Value("i", 0), int(jt.get_seed())))
        self.num_workers = num_workers
        self._closer = weakref.finalize(self, self._pool.terminate)

    def batches(self, index_lists: Iterable[Iterable[int]]) -> Iterator[Any]:
        """Collated numpy batches for ``index_lists``, in order; a worker's error is raised here."""
        lists = iter(index_lists)
        pending: collections.deque = collections.deque()

        def request(count: int) -> None:
            for indices in itertools.islice(lists, count):
                pending.append(self._pool.apply_async(_load_batch, ([int(i) for i in indices],)))

        request(PREFETCH_PER_WORKER * self.num_workers)
        while pending:
            batch = pending.popleft().get()
            request(1)
            yield batch

    def close(self) -> None:
        self._closer()


def workers_of(dataset: Any) -> int:
    """How many loader workers the user's dataset asked for (0 where jittor would use none)."""
    if getattr(dataset, "_disable_workers", False):
        return 0
    return int(getattr(dataset, "num_workers", 0) or 0)


def new_workers(dataset: Any) -> Optional[BatchWorkers]:
    count = workers_of(dataset)
    return BatchWorkers(dataset, count) if count > 0 else None
