"""Worker processes that load the batches of the Trainer's copy of a jittor Dataset.

jittor's own workers cannot serve the Trainer: they read one flat index list per epoch that jittor
itself shuffles and splits across MPI ranks ("Batch sampler not support yet"), hand batches to
whichever worker claimed them first (two workers can swap the order of two batches), keep loading
an abandoned epoch's batches into their ring buffers, and a worker's exception sends SIGINT to the
training process (which jittor's handler turns into a quick exit) instead of an error.

So the copy (:class:`~fastcore_train.backends.jittor.dataloader.SampledDataset`) runs this small
pool, which shares nothing with its workers but two pipes each, one reader and one writer: no lock
a stopped worker could hold, no helper thread (``multiprocessing.Pool``, tried before, hung when
stopped). Batch ``k`` of an epoch goes to worker ``k % num_workers``, at most ``PREFETCH`` ahead
per worker, and is read back in that order: the sampler's order, whatever the worker count.

- Workers are forked (as jittor forks its own) and set up for jittor as jittor sets up its own;
  they ignore Ctrl-C (the training process decides) and leave when the training process does.
- A worker's exception is raised in the training process with the sample index and the worker's
  traceback; a worker that dies is named with its exit code.
- Stopping is SIGTERM then join, as the worker restores SIGTERM's default action first thing
  (signals are held back across the fork until it has): on an abandoned or failed epoch, :meth:`BatchWorkers.close`, garbage collection and interpreter exit.
  The next epoch after an abandoned one starts fresh workers; complete epochs keep them.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
import traceback
import weakref
from multiprocessing.connection import wait
from typing import Any, Callable, Iterable, Iterator, Optional

import jittor as jt

#: Batches requested ahead per worker (torch's DataLoader's default prefetch_factor).
PREFETCH = 2
#: Seconds a stopped worker gets to leave after SIGTERM before SIGKILL.
STOP_TIMEOUT = 10.0
#: How often (seconds) an idle worker checks that the training process is still there.
PARENT_POLL = 1.0


#: Signals held back in the training process while it forks a worker, so that none reaches the new
#: worker before it has replaced the handlers it inherited.
_HELD = {signal.SIGTERM, signal.SIGINT}


class WorkerError(RuntimeError):
    """A loader worker failed or died; the message names the worker, the batch and the sample."""


def workers_of(dataset: Any) -> int:
    """How many loader workers a jittor Dataset asked for (0 where jittor would use none)."""
    if getattr(dataset, "_disable_workers", False):
        return 0
    return int(getattr(dataset, "num_workers", 0) or 0)


def _leave_with_parent(parent: int) -> None:
    """SIGTERM this worker when the training process ends (Linux), even by a quick exit."""
    if threading.current_thread() is not threading.main_thread():
        return  # PDEATHSIG follows the forking thread; the idle poll covers the rest
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def _signals_of_a_worker() -> None:
    """SIGTERM ends a worker (the training process's own handler, inherited through fork, would
    only note it); Ctrl-C and any other signal the training process handles are the training
    process's to act on. Then the signals held back across the fork arrive."""
    for number in signal.valid_signals():
        if number not in (signal.SIGKILL, signal.SIGSTOP) and callable(signal.getsignal(number)):
            signal.signal(number, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)


def _worker_main(dataset: Any, worker_id: int, seed: int, parent: int, tasks: Any, results: Any) -> None:
    _signals_of_a_worker()
    _leave_with_parent(parent)
    import jittor_utils  # jittor's own worker set-up (jittor.dataset.Dataset._worker_main)

    jt.flags.use_cuda_host_allocator = 0
    jittor_utils.cc.init_subprocess()
    jt.jt_init_subprocess()
    jt.set_global_seed((seed ^ (worker_id * 1167)) ^ 1234)
    jt.flags.use_parallel_op_compiler = 0
    while True:
        try:
            while not tasks.poll(PARENT_POLL):
                if os.getppid() != parent:
                    return
            task = tasks.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        number, indices = task
        index = None
        try:
            samples = []
            for index in indices:
                samples.append(dataset[index])
            index = None
            reply = (number, dataset.collate_batch(samples), None)
            results.send(reply)
            continue
        except (BrokenPipeError, EOFError):
            return
        except BaseException as error:  # noqa: BLE001 - sent to the training process
            failure = (type(error), index, list(indices), traceback.format_exc())
        try:
            results.send((number, None, failure))
        except (BrokenPipeError, EOFError):
            return
        except Exception:  # noqa: BLE001 - an exception class that cannot be pickled
            results.send((number, None, (RuntimeError,) + failure[1:]))


def _stop(processes: list, connections: list) -> None:
    """SIGTERM every worker, wait for each, SIGKILL one that stays; close the pipes."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(STOP_TIMEOUT)
        if process.is_alive():
            process.kill()
            process.join()
    processes.clear()
    for connection in connections:
        connection.close()
    connections.clear()


class BatchWorkers:
    """``num_workers`` forked processes loading ``dataset``'s batches for one epoch at a time."""

    def __init__(self, dataset: Any, num_workers: int) -> None:
        self.dataset = dataset
        self.num_workers = num_workers
        self._processes: list = []
        self._connections: list = []
        self._tasks: list = []
        self._results: list = []
        self._epoch: Optional[object] = None  # the iteration now using the workers
        self._outstanding = 0  # batches requested and not yet read back
        self._stopper = weakref.finalize(self, _stop, self._processes, self._connections)

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self._processes]

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")  # jittor is not re-imported; it forks its own workers too
        seed, parent = int(jt.get_seed()), os.getpid()
        for worker_id in range(self.num_workers):
            task_reader, task_writer = context.Pipe(duplex=False)
            result_reader, result_writer = context.Pipe(duplex=False)
            process = context.Process(target=_worker_main, name=f"fastcore-jittor-loader-{worker_id}", daemon=True,
                                      args=(self.dataset, worker_id, seed, parent, task_reader, result_writer))
            held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
            try:
                process.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
            task_reader.close()
            result_writer.close()
            self._processes.append(process)
            self._tasks.append(task_writer)
            self._results.append(result_reader)
            self._connections.extend((task_writer, result_reader))

    def close(self) -> None:
        """Stop the workers now (a later epoch starts new ones)."""
        self._epoch, self._outstanding = None, 0
        _stop(self._processes, self._connections)
        self._tasks.clear()
        self._results.clear()

    def batches(self, index_lists: Iterable[Iterable[int]], convert: Callable[[Any], Any]) -> Iterator[Any]:
        """``convert(collated batch)`` for each index list, in order. An epoch left before its end
        (or failing) stops the workers; a new call while another epoch is open abandons that one."""
        if self._outstanding:
            self.close()
        if not self._processes:
            self._start()
        epoch = self._epoch = object()
        return self._epoch_batches(epoch, iter(index_lists), convert)

    def _epoch_batches(self, epoch: object, lists: Iterator[Iterable[int]], convert: Callable) -> Iterator[Any]:
        count, sent, received, finished = self.num_workers, 0, 0, False
        try:
            while True:
                while not finished and sent - received < PREFETCH * count:
                    indices = next(lists, None)
                    if indices is None:
                        finished = True
                    else:
                        self._send(sent % count, sent, [int(index) for index in indices])
                        sent += 1
                        self._outstanding += 1
                if received == sent:
                    break
                batch = self._receive(received % count, received)
                received += 1
                self._outstanding -= 1
                yield convert(batch)
                if self._epoch is not epoch:
                    raise RuntimeError("This epoch's batch iterator was abandoned: another epoch started.")
        finally:
            if self._epoch is epoch:
                self._epoch = None
                if self._outstanding:
                    self.close()  # left midway or failed: nothing keeps loading for it

    def _died(self, worker_id: int, number: int) -> WorkerError:
        process = self._processes[worker_id]
        process.join(STOP_TIMEOUT)
        return WorkerError(f"jittor loader worker {worker_id} (pid {process.pid}) exited with code "
                           f"{process.exitcode} while loading batch {number} of this epoch.")

    def _send(self, worker_id: int, number: int, indices: list[int]) -> None:
        try:
            self._tasks[worker_id].send((number, indices))
        except OSError:  # its end of the pipe is closed: it is gone
            raise self._died(worker_id, number) from None

    def _receive(self, worker_id: int, number: int) -> Any:
        connection, process = self._results[worker_id], self._processes[worker_id]
        while not wait([connection, process.sentinel]):
            pass
        try:
            got, batch, failure = connection.recv()
        except (EOFError, OSError):
            raise self._died(worker_id, number) from None
        if failure is not None:
            kind, index, indices, text = failure
            where = f"sample {index}" if index is not None else f"the collate_batch of samples {indices}"
            message = (f"jittor loader worker {worker_id} failed on {where} (batch {number} of this epoch):\n"
                       f"{text}")
            try:
                error = kind(message)
            except Exception:  # noqa: BLE001 - an exception type that needs other arguments
                error = WorkerError(message)
            raise error
        assert got == number, (got, number)
        return batch
