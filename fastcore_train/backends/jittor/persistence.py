"""``driver.io`` for jittor (:class:`JittorPersistence`): ``jt.save`` of the model and of the
optimizers' state, :func:`load_file` to read them, and the per-step seeder's random state.

Checkpoint files are hashed while written: ``jt.save`` takes only a path (and builds the whole
pickle in memory, then its sha1, then a copy with the trailer), so :meth:`JittorPersistence.write_object`
writes the same bytes to a checkpoint's file object itself (:func:`write_pickle`: the pickle
streamed through a sha1, then the trailer); a path still goes to ``jt.save``.

``jt.load`` is ``pickle.loads``: a file from elsewhere could run code. :func:`load_file` reads the
same format (a pickle, optionally followed by jittor's sha1 trailer) through
:mod:`fastcore_train.utils.safe_pickle`, which rebuilds numpy arrays, jittor ``Var``s (made from
an array) and plain data only; ``load_model(..., weights_only=False)`` uses ``jt.load`` for a
trusted file, e.g. a whole pickled model.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any, BinaryIO, Callable

import jittor as jt

from fastcore_train.backends.jittor import snapshot
from fastcore_train.checkpoint.checksums import HashingFile
from fastcore_train.drivers.persistence import Persistence
from fastcore_train.utils import safe_pickle

#: ``jt.save`` appends the sha1 of the pickle and this marker.
TRAILER_MARK = b"HCAJSLHD"

TRAINING_STATE_FORMAT = "fastcore_train.jittor.training_state.v1"


#: ``jt.save``'s pickle protocol.
PICKLE_PROTOCOL = 4


def write_pickle(obj: Any, file: BinaryIO) -> None:
    """Write to ``file`` the bytes ``jt.save(obj, path)`` writes to a ``.pkl`` path (a protocol-4
    pickle, its sha1, :data:`TRAILER_MARK`), streamed: no copy of the whole pickle in memory, and
    the sha1 computed on a helper thread beside each large write."""
    sha1 = HashingFile(file, hasher=hashlib.sha1())  # type: ignore[arg-type]
    pickle.Pickler(sha1, PICKLE_PROTOCOL).dump(obj)
    if sha1.hexdigest is None:
        raise RuntimeError("pickle seeked back while writing a jittor file; its sha1 trailer cannot be computed.")
    file.write(bytes.fromhex(sha1.hexdigest) + TRAILER_MARK)


def _strip_trailer(path: Path) -> Callable[[bytes], bytes]:
    def strip(data: bytes) -> bytes:
        if not data.endswith(TRAILER_MARK):
            return data
        body, digest = data[:-28], data[-28:-8]
        if hashlib.sha1(body).digest() != digest:
            raise ValueError(f"{str(path)!r} is damaged: its sha1 (written by jt.save) does not match its content.")
        return body
    return strip


def load_file(path: Path, weights_only: bool = True) -> Any:
    """What ``jt.load(path)`` returns, read without running code of the file's (see the module
    docstring); ``weights_only=False`` is ``jt.load`` itself."""
    if not weights_only:
        return jt.load(str(path))
    return safe_pickle.load_file(path, extra={("jittor", "jittor_core.Var"): jt.Var},
                                 hint=safe_pickle.TRUSTED_HINT, transform=_strip_trailer(Path(path)))


def optimizer_state(optimizer: jt.optim.Optimizer) -> dict[str, Any]:
    """``optimizer.state_dict()`` without the parameters and gradients its groups also hold
    (``load_state_dict`` ignores the parameters; pending gradients are not training state)."""
    state = optimizer.state_dict()
    defaults = dict(state["defaults"])
    if "param_groups" in defaults:
        defaults["param_groups"] = [{key: value for key, value in group.items() if key not in ("params", "grads")}
                                    for group in defaults["param_groups"]]
    return {**state, "defaults": defaults}


def load_optimizer_state(optimizer: jt.optim.Optimizer, state: dict[str, Any]) -> None:
    """Restore what :func:`optimizer_state` returned; the gradients saved with it are not pending ones."""
    optimizer.load_state_dict(state)
    optimizer.zero_grad()


class JittorPersistence(Persistence):
    """State dicts (numpy arrays) with ``jt.save``; every write waits for pending jittor ops first."""

    model_file_suffix = ".pkl"
    saves_to_file_objects = True  # through write_pickle (see the module docstring)

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """``jt.save`` of the state dict (numpy arrays), or of the whole model when ``only_state_dict=False``."""
        jt.sync_all()
        self.write_object(self.model_state() if only_state_dict else self.driver.unwrap_model(), path, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        self.read_model(path, only_state_dict, **kwargs)()

    def read_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> Callable[[], None]:
        loaded = self.as_state_dict(load_file(path, **kwargs), path, jt.Module, "a jittor model")
        model = self.driver.unwrap_model()
        expected = set(model.state_dict())
        missing, unexpected = sorted(expected - set(loaded)), sorted(set(loaded) - expected)
        if missing or unexpected:
            raise ValueError(f"{str(path)!r} does not fit the model {type(model).__name__}: missing {missing}, "
                             f"unexpected {unexpected}. Load it into a model of the same structure as the one saved.")

        def apply() -> None:
            model.load_state_dict(loaded)
            jt.sync_all()
        return apply

    def save_training_state(self, path: Path) -> None:
        jt.sync_all()
        self.write_object(self.training_state_object(), path)

    def model_state(self) -> Any:
        return self.driver.unwrap_model().state_dict()

    def training_state_object(self) -> dict[str, Any]:
        return {"format": TRAINING_STATE_FORMAT,
                "optimizers": [optimizer_state(optimizer) for optimizer in self.driver.optimizers]}

    def write_object(self, obj: Any, path: Any, **kwargs: Any) -> None:
        """``jt.save`` to a path; to a binary file object, the same bytes by :func:`write_pickle`."""
        if isinstance(path, (str, os.PathLike)):
            jt.save(obj, str(path), **kwargs)
        else:
            write_pickle(obj, path)

    def host_copy(self, obj: Any) -> Any:
        return snapshot.host_copy(obj, self.host_buffers)

    def load_training_state(self, path: Path) -> None:
        self.read_training_state(path)()

    def read_training_state(self, path: Path) -> Callable[[], None]:
        state = load_file(path)
        if not isinstance(state, dict) or state.get("format") != TRAINING_STATE_FORMAT:
            raise ValueError(f"{str(path)!r} was not written by fastcore_train's jittor driver.")

        def apply() -> None:
            self.restore_training_state(state, load_optimizer_state)  # jittor has no scaler state to restore
            jt.sync_all()
        return apply

    def rng_state(self) -> dict[str, Any]:
        return self.driver.seeder.state()

    def load_rng_state(self, state: dict[str, Any]) -> None:
        self.driver.seeder.load(state)
