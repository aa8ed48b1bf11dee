"""What a driver writes into a checkpoint and reads back: ``driver.io``.

The checkpoint folder's layout is :mod:`fastcore_train.checkpoint`'s, the same for every backend;
a driver's :class:`Persistence` supplies the files of its framework: the model, the training state
(optimizers, and the precision's grad-scaler state under
:data:`~fastcore_train.drivers.precision.GRAD_SCALER_KEY`) and this rank's framework RNG state.
A backend subclasses it in ``backends/<name>/persistence.py``; sharded drivers, whose saving is
collective, subclass that.

Asynchronous checkpoints (:mod:`fastcore_train.checkpoint.async_writer`) need three more things of a
backend: :meth:`Persistence.model_state` and :meth:`Persistence.training_state_object` (what the
two files hold), :meth:`Persistence.write_object` (the framework's save of such an object), and
``host_copy`` from its ``backends/<name>/snapshot.py`` (those objects with every tensor copied to
host memory). The synchronous save writes the same objects with the same call, so an async save's
files equal a sync save's byte for byte. A framework with an asynchronous save of its own
(``torch.distributed.checkpoint.async_save`` for torch FSDP's sharded state) starts it in
:meth:`Persistence.start_async_write` instead; the shared mechanism waits for the
:class:`PendingWrites` it returns before it publishes the checkpoint.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence

from fastcore_train.drivers.host_buffers import HostBuffers
from fastcore_train.drivers.precision import GRAD_SCALER_KEY

if TYPE_CHECKING:
    from fastcore_train.drivers.driver import Driver


class Pending(Protocol):
    """A write in flight (e.g. a ``concurrent.futures.Future``)."""

    def result(self) -> Any:
        """Wait for the write; raise its error."""


class PendingWrites:
    """The writes :meth:`Persistence.start_async_write` started: :meth:`result` waits for all."""

    def __init__(self, writes: Sequence[Pending]) -> None:
        self.writes = list(writes)

    def result(self) -> None:
        """Wait for every write (all of them, even after one failed), then raise the first error."""
        errors = []
        for write in self.writes:
            try:
                write.result()
            except BaseException as error:  # the others still run into the same folder: wait for them
                errors.append(error)
        if errors:
            raise errors[0]


def training_state_layout(optimizer_states: list[Any], scaler_state: Any = None) -> dict[str, Any]:
    """A training-state file's content, the same for every backend: the optimizers' states, then
    the precision's scaler state (None without a scaler). Also what a converted checkpoint writes."""
    return {"optimizers": optimizer_states, GRAD_SCALER_KEY: scaler_state}


class Persistence(ABC):
    """Saving and loading for ``driver``: model files, training state and RNG state."""

    #: The extension of the files (or folders) :meth:`save_model` writes, e.g. ``.pt``.
    model_file_suffix: str = ""
    #: True when saving is a collective operation (sharded models): the controller then calls
    #: ``save_model``/``save_training_state`` on every rank and this object decides who writes.
    collective_save: bool = False
    #: True when, although saving is collective, the checkpoint converter reads the files written
    #: (torch's ``torch.distributed.checkpoint`` folders): the checkpoint then records the model's
    #: layer layout, which conversion needs.
    converter_reads_sharded_files: bool = False
    #: True when the framework saves to a binary file object as well as to a path (``torch.save``;
    #: paddle and jittor through their backend, see theirs): :meth:`save_model`,
    #: :meth:`save_training_state` and :meth:`write_object` then take a file object, and checkpoint
    #: files are hashed while written, with no read-back.
    saves_to_file_objects: bool = False
    #: With :attr:`saves_to_file_objects`: whether ``save_model(only_state_dict=False)`` does too
    #: (paddle's whole model is a folder: written by path, hashed beside the next write).
    saves_whole_model_to_file_objects: bool = True
    #: True when :meth:`host_copy` may run on a background thread while the next batch's forward and
    #: backward run (torch: its copies release the GIL and touch no autograd state). An asynchronous
    #: checkpoint then copies the parameters and optimizer state beside training, and the Trainer waits
    #: for the copy only before the next optimizer step (what changes them); :meth:`freeze_buffers`
    #: copies at once what the forward pass changes. Otherwise everything is copied at once.
    copies_in_background: bool = False

    def __init__(self, driver: "Driver") -> None:
        self.driver = driver
        #: the last snapshot's host memory, copied into by the next (:meth:`host_copy`)
        self.host_buffers = HostBuffers()

    @abstractmethod
    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Write the (unwrapped) model to ``path``."""

    @abstractmethod
    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """Restore the model from ``path``, written by :meth:`save_model`."""

    @abstractmethod
    def save_training_state(self, path: Path) -> None:
        """Write the optimizers' state (and the precision's scaler state) to ``path``."""

    @abstractmethod
    def load_training_state(self, path: Path) -> None:
        """Restore what :meth:`save_training_state` wrote."""

    # ------------------------------------------------------------------ loading in two steps (load_checkpoint)
    def read_model(self, path: Path, only_state_dict: bool = True) -> Callable[[], None]:
        """Read the model file at ``path`` and return the step that puts it into the model.
        ``load_checkpoint`` reads while the checksums are verified on helper threads and applies
        only once they are, so a damaged file leaves the model untouched. The default reads
        nothing now (``load_model`` runs as the second step): a backend splits its load by
        overriding this and :meth:`read_training_state` beside ``load_model``/``load_training_state``."""
        return lambda: self.load_model(path, only_state_dict=only_state_dict)

    def read_training_state(self, path: Path) -> Callable[[], None]:
        """As :meth:`read_model`, for :meth:`load_training_state`."""
        return lambda: self.load_training_state(path)

    def model_reader(self, path: Path, only_state_dict: bool = True) -> Callable[[], None]:
        """:meth:`read_model`, or, for a subclass that loads otherwise (a sharded driver overriding
        ``load_model`` but not ``read_model``), its ``load_model`` as the second step."""
        if _splits(type(self), "read_model", "load_model"):
            return self.read_model(path, only_state_dict)
        return Persistence.read_model(self, path, only_state_dict)

    def training_state_reader(self, path: Path) -> Callable[[], None]:
        """:meth:`read_training_state`, as :meth:`model_reader` says."""
        if _splits(type(self), "read_training_state", "load_training_state"):
            return self.read_training_state(path)
        return Persistence.read_training_state(self, path)

    @abstractmethod
    def rng_state(self) -> Any:
        """This rank's framework random state (CPU and device generators) as JSON-able data."""

    @abstractmethod
    def load_rng_state(self, state: Any) -> None:
        """Restore what :meth:`rng_state` returned."""

    # ------------------------------------------------------------------ snapshots (async checkpoints)
    @property
    def supports_snapshot(self) -> bool:
        """Whether asynchronous checkpoints work for this driver: not for collective (sharded) saving
        unless the driver says so (torch FSDP), nor for a backend without :meth:`host_copy`."""
        return not self.collective_save and type(self).host_copy is not Persistence.host_copy

    def start_async_write(self, model_path: Path, state_path: Path) -> Optional[PendingWrites]:
        """Start the framework's own asynchronous save of the model and training state to these
        paths of the staging folder, and return it; None (the default): :meth:`snapshot` copies are
        written by the shared background thread instead.

        Called on every rank, on the training thread, after :meth:`begin_snapshot` (whose copies
        must then be taken at once: the writer waits for this write before it writes them). What it
        starts must hold the state of this moment and call no collective on the training's process
        group.
        """
        return None

    def model_state(self) -> Any:
        """What ``save_model(path, only_state_dict=True)`` writes (the live state dict)."""
        raise NotImplementedError(f"{type(self).__name__} does not expose its model state for snapshots.")

    def training_state_object(self) -> Any:
        """What :meth:`save_training_state` writes (live optimizer and scaler state)."""
        raise NotImplementedError(f"{type(self).__name__} does not expose its training state for snapshots.")

    def write_object(self, obj: Any, path: Path) -> None:
        """The framework's save of a :meth:`model_state`/:meth:`training_state_object` (or their host copies)."""
        raise NotImplementedError(f"{type(self).__name__} cannot write snapshots.")

    def host_copy(self, obj: Any) -> Any:
        """``obj`` with every framework tensor copied to host memory (``backends/<name>/snapshot.py``)."""
        raise NotImplementedError(f"{type(self).__name__} cannot copy its state to host memory.")

    @property
    def hashes_while_writing(self) -> bool:
        """Whether checkpoint files go through a hashing file object (not for collective saving,
        whose files are folders written by every rank)."""
        return self.saves_to_file_objects and not self.collective_save

    def freeze_buffers(self, model_state: Any) -> Any:
        """``model_state`` with the entries the forward pass changes (e.g. batch-norm statistics)
        replaced by host copies, for :attr:`copies_in_background` backends."""
        raise NotImplementedError(f"{type(self).__name__} does not copy in the background.")

    def begin_snapshot(self) -> "HostSnapshot":
        """Host copies of (model state, training state), to write in the background with
        :meth:`write_object` while training changes the live tensors: taken now, or (with
        :attr:`copies_in_background`) by :meth:`HostSnapshot.complete` on the writer's thread."""
        self._check_snapshot()
        model, state = self.model_state(), self.training_state_object()
        if not self.copies_in_background:
            copies = self.host_copy((model, state))
            return HostSnapshot(lambda: copies)
        model = self.freeze_buffers(model)
        return HostSnapshot(lambda: self.host_copy((model, state)), deferred=True)

    def _check_snapshot(self) -> None:
        if not self.supports_snapshot:
            raise NotImplementedError(
                f"Asynchronous checkpoints are not available for {type(self.driver).__name__}: "
                + ("its saving is collective (sharded state; of the sharded drivers only driver='torch_fsdp' "
                   "saves asynchronously), " if self.collective_save else "")
                + "so it cannot snapshot its state to host memory. Save with blocking=True "
                "(CheckpointCallback(async_save=False)).")

    # ------------------------------------------------------------------ shared by the backends
    @staticmethod
    def as_state_dict(loaded: Any, path: Path, module_type: type, model_kind: str = "a model") -> Any:
        """What a model file held, as a state dict: a dict as it is, a whole pickled model (a
        ``module_type``) by its ``state_dict()``; anything else is a TypeError naming the file."""
        if isinstance(loaded, module_type):
            return loaded.state_dict()
        if not isinstance(loaded, dict):
            raise TypeError(f"{str(path)!r} holds a {type(loaded).__name__}, not {model_kind} or state dict.")
        return loaded

    def training_state(self, optimizer_states: list[Any]) -> dict[str, Any]:
        """The training state a driver writes (:func:`training_state_layout`) with the precision's
        scaler state."""
        return training_state_layout(optimizer_states, self.driver.precision.state_dict())

    def restore_training_state(self, state: dict[str, Any],
                               load_optimizer: Optional[Callable[[Any, Any], None]] = None) -> None:
        """Restore a :meth:`training_state`: each optimizer's with ``load_optimizer(optimizer,
        saved)`` (default ``optimizer.load_state_dict(saved)``), then the scaler's, if any."""
        saved = state["optimizers"]
        self.check_optimizer_count(len(saved))
        for optimizer, optimizer_state in zip(self.driver.optimizers, saved):
            if load_optimizer is None:
                optimizer.load_state_dict(optimizer_state)
            else:
                load_optimizer(optimizer, optimizer_state)
        self.driver.precision.load_state_dict(state.get(GRAD_SCALER_KEY))

    def check_optimizer_count(self, saved: int) -> None:
        """A ValueError unless a checkpoint's ``saved`` optimizer states match the driver's optimizers."""
        optimizers = self.driver.optimizers
        if saved != len(optimizers):
            raise ValueError(
                f"The checkpoint holds {saved} optimizer state(s) but the trainer has "
                f"{len(optimizers)} optimizer(s); pass the same optimizers as when it was saved.")


def _defined_by(cls: type, name: str) -> type:
    return next(klass for klass in cls.__mro__ if name in vars(klass))


def _splits(cls: type, read: str, load: str) -> bool:
    """Whether ``cls``'s ``read`` comes from the class that gives it its ``load`` (or a subclass)."""
    return issubclass(_defined_by(cls, read), _defined_by(cls, load))


class HostSnapshot:
    """Host copies of a driver's (model state, training state) for an asynchronous checkpoint.

    ``take()`` returns them; it runs at once, or, ``deferred``, in :meth:`complete` (called by the
    background writer before it writes). :attr:`ready` is set once the copies are taken (or
    failed): until then the live parameters and optimizer state must not change, which the
    Trainer ensures by waiting for it before the next optimizer step.
    """

    def __init__(self, take: Callable[[], tuple[Any, Any]], deferred: bool = False) -> None:
        self._take = take
        self.ready = threading.Event()
        self.model: Any = None
        self.state: Any = None
        if not deferred:
            self.complete()

    def complete(self) -> None:
        """Take the copies, if not taken yet."""
        if self.ready.is_set():
            return
        try:
            self.model, self.state = self._take()
        finally:
            self.ready.set()
