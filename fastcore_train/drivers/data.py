"""How a driver's framework serves data: ``driver.data``.

The controller asks it how many batches a dataloader has, which batch sampler it draws from, how
it samples (so that :mod:`fastcore_train.samplers.adapt` can swap in a reproducible sampler), to
rebuild it around another batch sampler, to move a batch to the device and to read tensors as
python numbers. Defaults here are the answers for any iterable; a backend's
``backends/<name>/dataloader.py`` subclasses :class:`DataAdapter` and names its framework's calls:
how its dataloaders are read and rebuilt, and its ``tensors`` module for moving and reading tensors.
"""
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional

from fastcore_train.utils.arrays import holds_arrays

if TYPE_CHECKING:
    from fastcore_train.samplers.adapt import DataLoaderArgs


class DataAdapter:
    """Data handling for one driver; ``device`` is where batches go before the forward.

    ``needs_move`` is False when batches already arrive where the model wants them (the loop then
    skips :meth:`move`).
    """

    #: The kind of dataloader to suggest in errors, e.g. ``"a torch.utils.data.DataLoader"``.
    example = "an iterable of batches"
    #: True where reading a value back (``to_numeric``) makes a lazy framework run its graph in
    #: pieces, which changes float rounding (jittor): the Trainer then adds no default NaN guard.
    reading_changes_results = False
    #: True where the framework's own loader must not serve an evaluation even when the ranks do
    #: not split it (jittor's Dataset: its workers are not ours to stop, see
    #: ``backends/jittor/batch_workers.py``): the Evaluator then reads a copy of it in dataset order.
    copy_for_evaluation = False
    #: The backend's ``tensors`` module: ``to_numeric(value)``, ``to_numpy(value)`` and (where
    #: batches are moved) ``move_to_device(batch, device)``. None: values are left as they are.
    tensors: Optional[ModuleType] = None

    #: How many device values this adapter has read as host values (``to_numeric``/``to_numpy``
    #: calls); bench/reads.py reports it per 100 batches.
    reads = 0

    def __init__(self, device: Any = None, needs_move: bool = False) -> None:
        self.device = device
        self.needs_move = needs_move

    def check(self, dataloader: Any, name: str) -> None:
        """Raise a clear TypeError when ``dataloader`` cannot be iterated."""
        if not hasattr(dataloader, "__iter__"):
            raise TypeError(f"{name} must be iterable (e.g. {self.example}), got {type(dataloader).__name__}.")

    def length(self, dataloader: Any) -> Optional[int]:
        """Batches per epoch, or None for an unsized iterable."""
        try:
            return len(dataloader)
        except TypeError:
            return None

    def batch_sampler(self, dataloader: Any) -> Any:
        """The batch sampler a dataloader draws from, or None."""
        return getattr(dataloader, "batch_sampler", None)

    def set_epoch(self, dataloader: Any, epoch: int) -> None:
        """Tell the dataloader's (batch) sampler which epoch starts (reshuffles seeded samplers)."""
        for sampler in (self.batch_sampler(dataloader), getattr(dataloader, "sampler", None)):
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
                return

    def dataloader_args(self, dataloader: Any) -> Optional["DataLoaderArgs"]:
        """What the dataloader samples and how (for swapping in a reproducible sampler); None when
        this kind of dataloader cannot take another batch sampler."""
        return None

    def replace_batch_sampler(self, dataloader: Any, batch_sampler: Any) -> Any:
        """A new dataloader like ``dataloader`` drawing batches from ``batch_sampler``; the user's
        dataloader is left untouched and usable."""
        raise NotImplementedError(f"{type(self).__name__} cannot replace a dataloader's batch sampler.")

    def release(self, dataloader: Any) -> None:
        """Stop what a dataloader of ours keeps running between epochs (jittor's copy of a Dataset:
        its worker processes); called for every loader a controller adapted when its ``run()``
        ends (:mod:`fastcore_train.controllers.adapted_loaders`). The next epoch starts it again."""

    def to_device(self, batch: Any) -> Any:
        """``batch`` ready for the model: moved when batches do not arrive on the device
        (:attr:`needs_move`) or hold numpy arrays (plain data: they become the backend's tensors)."""
        return self.move(batch) if self.needs_move or holds_arrays(batch) else batch

    def move(self, batch: Any) -> Any:
        """``batch`` with every tensor inside (nested) moved to :attr:`device`."""
        move = getattr(self.tensors, "move_to_device", None)
        return batch if move is None else move(batch, self.device)

    def to_numeric(self, value: Any) -> Any:
        """A tensor (or nested container of them) as python numbers, for logs and results."""
        self.reads += 1
        return value if self.tensors is None else self.tensors.to_numeric(value)

    def to_numpy(self, value: Any) -> Any:
        """A tensor (or nested container of them) as numpy arrays on the host, for predictions."""
        self.reads += 1
        return value if self.tensors is None else self.tensors.to_numpy(value)

    def start_read(self, value: Any) -> "PendingRead":
        """Begin reading a one-number tensor as a python number; :meth:`PendingRead.result` gives it.

        Read later (once more work is queued), a value costs no wait for work queued after it on
        an asynchronous runtime. The default keeps the detached tensor and reads it then; a
        backend with an asynchronous device starts the copy to the host here (torch on CUDA).
        """
        if self.reading_changes_results:
            # a lazy framework (jittor): a value kept for later would be run with another step's graph,
            # on one rank only under MPI (rank 0's progress), which can leave a collective waiting
            pending = PendingRead(self.to_numeric, value)
            pending.result()
            return pending
        detach = getattr(value, "detach", None)
        return PendingRead(self.to_numeric, detach() if callable(detach) else value)


class PendingRead:
    """A device value being read: :meth:`result` is its python number (read once, then kept)."""

    __slots__ = ("_read", "_value", "_done", "_result")

    def __init__(self, read: Any, value: Any) -> None:
        self._read, self._value, self._done, self._result = read, value, False, None

    def result(self) -> Any:
        if not self._done:
            self._result, self._done, self._value = self._read(self._value), True, None
        return self._result
