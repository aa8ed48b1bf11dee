"""Unpickling that runs no code of the file's choosing: only plain data is rebuilt.

A pickle is a small program: its ``GLOBAL``/``STACK_GLOBAL``/``INST``/``EXT`` opcodes name any
importable object (``os.system``, ``builtins.eval``...) and ``REDUCE`` calls it, so ``pickle.load``
of a file someone else wrote runs their code. Every name a pickle refers to goes through
``Unpickler.find_class`` (and an id through ``persistent_load``), so :class:`RestrictedUnpickler`
answers only for an allow-list and refuses everything else with :class:`UnsafePickleError`
before anything is called. What the list holds, and why each is harmless with any arguments:

- plain containers and numbers (``collections.OrderedDict``, ``builtins.tuple``/``list``/
  ``dict``/``set``/``frozenset``/``complex``/``bytes``/``bytearray``, ``_codecs.encode`` that
  protocol-2 pickles use for bytes): they build data;
- numpy arrays, scalars and dtypes (``numpy.ndarray``, ``numpy.dtype``, ``_reconstruct`` and
  ``scalar`` of ``numpy.core.multiarray``, ``_frombuffer`` of ``numpy.core.numeric`` for
  protocol 5, and their ``numpy._core`` names in numpy 2): they build arrays from bytes; an
  object array's items are unpickled through this same unpickler;
- what a backend adds for its own files (``extra``), e.g. jittor's ``Var`` (built from an array).

These are what the state files of paddle (``paddle.save``), jittor (``jt.save``) and oneflow
(``flow.save``'s ``pickled_data``) hold for state dicts and optimizer states: checked with
``pickletools`` on real files. A whole pickled model names its classes and is refused.
"""
from __future__ import annotations

import _compat_pickle
import importlib
import io
import pickle
from typing import Any, Callable, Mapping, Optional

#: ``(module, name)`` pairs any restricted load may rebuild (see the module docstring).
SAFE_GLOBALS: frozenset[tuple[str, str]] = frozenset({
    ("collections", "OrderedDict"),
    ("builtins", "tuple"), ("builtins", "list"), ("builtins", "dict"), ("builtins", "set"),
    ("builtins", "frozenset"), ("builtins", "complex"), ("builtins", "bytes"), ("builtins", "bytearray"),
    ("_codecs", "encode"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),  # protocol 5
})

#: What to do about a refused file one wrote oneself (a whole pickled model, ``only_state_dict=False``).
TRUSTED_HINT = ("A whole pickled model (saved with only_state_dict=False) is code by nature: if you wrote this file "
                "yourself and trust it, load it with trainer.load_model(folder, only_state_dict=False, "
                "weights_only=False).")

_NUMPY_CORE = {"numpy.core.multiarray": "multiarray", "numpy._core.multiarray": "multiarray",
               "numpy.core.numeric": "numeric", "numpy._core.numeric": "numeric"}


class UnsafePickleError(pickle.UnpicklingError):
    """A file whose unpickling would call something other than plain-data constructors."""


def _resolve(module: str, name: str) -> Any:
    """The allowed object ``module.name``; numpy 1 and 2 name their core module differently
    (pickles written under either load under both), so the one this numpy has is used."""
    if module in _NUMPY_CORE:
        import numpy

        # By version, not by hasattr(numpy, "_core"): numpy 1.26 has a partial numpy._core shim
        # that appears as an attribute once something (pyarrow, pandas) imports part of it.
        core = "numpy._core" if int(numpy.__version__.split(".")[0]) >= 2 else "numpy.core"
        return getattr(importlib.import_module(f"{core}.{_NUMPY_CORE[module]}"), name)
    return getattr(importlib.import_module(module), name)


class RestrictedUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that rebuilds only :data:`SAFE_GLOBALS` and ``extra``.

    ``extra`` maps further ``(module, name)`` pairs to the object to use for them (a backend's
    tensor class, or a stand-in that only records its state). ``source`` and ``hint`` go into the
    refusal's message: which file, and what to do instead.
    """

    def __init__(self, file: io.BufferedIOBase, source: str = "the file",
                 extra: Optional[Mapping[tuple[str, str], Any]] = None, hint: str = "") -> None:
        super().__init__(file)
        self.source, self.extra, self.hint = source, dict(extra or {}), hint

    def find_class(self, module: str, name: str) -> Any:
        # python 2 names (protocols 0-2 write __builtin__.bytes...), renamed as pickle renames them;
        # the allow-list below then applies to the python 3 name.
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if (module, name) in self.extra:
            return self.extra[(module, name)]
        if (module, name) in SAFE_GLOBALS:
            return _resolve(module, name)
        raise UnsafePickleError(
            f"Refused to load {self.source}: it refers to {module}.{name}, and unpickling it would call that "
            "with arguments the file chose (code could run). Only plain data (containers, numbers, strings, "
            "numpy arrays, the framework's tensors) is loaded from a checkpoint or model file. Do not load "
            f"files from a source you do not trust.{' ' + self.hint if self.hint else ''}")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"Refused to load {self.source}: it uses pickle persistent ids, which no "
                                "fastcore_train file does; it was not written by fastcore_train.")


def loads(data: bytes, source: str = "the file", extra: Optional[Mapping[tuple[str, str], Any]] = None,
          hint: str = "") -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler`.

    Raises :class:`UnsafePickleError` for a name outside the allow-list and
    :class:`pickle.UnpicklingError` (with ``source`` in the message) for bytes that are no pickle.
    """
    try:
        return RestrictedUnpickler(io.BytesIO(data), source, extra, hint).load()
    except UnsafePickleError:
        raise
    except Exception as error:  # truncated, not a pickle at all, a constructor refusing its arguments
        raise pickle.UnpicklingError(f"Cannot read {source}: it is damaged or not a pickle "
                                     f"({type(error).__name__}: {error}).") from error


def load_file(path: Any, extra: Optional[Mapping[tuple[str, str], Any]] = None, hint: str = "",
              transform: Optional[Callable[[bytes], bytes]] = None) -> Any:
    """:func:`loads` of the file at ``path`` (``transform`` first turns its bytes into the pickle)."""
    with open(path, "rb") as handle:
        data = handle.read()
    return loads(transform(data) if transform else data, source=repr(str(path)), extra=extra, hint=hint)
