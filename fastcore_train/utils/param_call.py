"""Calling a function with the entries of one or more dict batches that match its parameters.

The signature is read once, when a :class:`ParamBinder` is built, never per step.
"""
from __future__ import annotations

import inspect
import operator
from collections.abc import Mapping
from typing import Any, Callable, Optional


class ParamBinder:
    """Precomputed parameter names of ``fn`` for keyword-matching dict batches to it.

    ``signature_fn`` is read instead of ``fn`` when ``fn`` is a wrapper (e.g. ``model.__call__``
    whose real parameters are those of ``model.forward``).
    """

    __slots__ = ("fn", "fn_name", "names", "required", "var_keyword", "_positional", "aliases", "hint")

    def __init__(self, fn: Callable[..., Any], signature_fn: Optional[Callable[..., Any]] = None,
                 aliases: Optional[Mapping[str, tuple[str, ...]]] = None, hint: Optional[str] = None) -> None:
        """``aliases``: other keys that fill a parameter absent under its own name (for metrics:
        transformers' ``logits`` for ``pred``, ``labels`` for ``target``); ``hint``: how to rename,
        said when a parameter is missing."""
        target = signature_fn if signature_fn is not None else fn
        params = inspect.signature(target).parameters.values()
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        self.fn = fn
        self.fn_name = getattr(target, "__qualname__", getattr(target, "__name__", repr(target)))
        self.names = tuple(p.name for p in params if p.kind in kinds)
        self.required = tuple(p.name for p in params if p.kind in kinds and p.default is p.empty)
        self.var_keyword = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params)
        self.aliases = {name: tuple(others) for name, others in (aliases or {}).items() if name in self.names}
        self.hint = hint or ("Rename batch keys with input_mapping={'batch_key': 'param_name'} (or output_mapping for "
                             "model outputs), or pass model_wo_auto_param_call=True to receive the batch as one "
                             "argument.")
        # Fast path for the common case: a plain dict holding every parameter, passed positionally.
        all_positional = all(p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD
                             for p in params if p.name in self.names)
        self._positional: Optional[Callable[[Any], tuple]] = None
        if all_positional and not self.var_keyword and self.names:
            getter = operator.itemgetter(*self.names)
            self._positional = getter if len(self.names) > 1 else (lambda batch: (getter(batch),))

    def __call__(self, batch: Mapping[str, Any]) -> Any:
        """Call ``fn`` with the entries of ``batch`` that it takes (all of them if it has **kwargs)."""
        positional = self._positional
        if positional is not None and type(batch) is dict:
            try:
                args = positional(batch)
            except KeyError:  # some optional parameter is absent: use keyword matching from now on
                self._positional = None
            else:
                return self.fn(*args)
        if self.var_keyword:
            return self.fn(**batch)
        kwargs = {name: batch[name] for name in self.names if name in batch}
        if len(kwargs) < len(self.required):
            self._raise_missing(kwargs, [batch])
        return self.fn(**kwargs)

    def call_with(self, *sources: Mapping[str, Any]) -> Any:
        """Call ``fn`` with parameters drawn from several dicts; a name found in two is ambiguous."""
        kwargs: dict[str, Any] = {}
        origin: dict[str, int] = {}
        for position, source in enumerate(sources):
            for key, value in source.items():
                if self.var_keyword or key in self.names:
                    if key in kwargs:
                        raise ValueError(
                            f"Ambiguous input for {self.fn_name}: the key {key!r} is present both in "
                            f"source #{origin[key]} and source #{position} (model outputs, then batch). "
                            "Rename one with output_mapping or input_mapping."
                        )
                    kwargs[key] = value
                    origin[key] = position
        if self.aliases:
            self._fill_aliases(kwargs, sources)
        if not self.var_keyword and len(kwargs) < len(self.required):
            self._raise_missing(kwargs, sources)
        return self.fn(**kwargs)

    def _fill_aliases(self, kwargs: dict[str, Any], sources: Any) -> None:
        """A parameter no source names takes the first of its aliases found (outputs, then batch)."""
        for name, others in self.aliases.items():
            if name in kwargs:
                continue
            for source in sources:
                found = next((key for key in others if key in source), None)
                if found is not None:
                    kwargs[name] = source[found]
                    break

    def _raise_missing(self, found: Mapping[str, Any], sources: Any) -> None:
        missing = [name for name in self.required if name not in found]
        available = sorted({key for source in sources for key in source})
        raise ValueError(
            f"{self.fn_name} needs the parameter(s) {missing} but the batch only has keys {available}. {self.hint}"
        )


def apply_mapping(mapping: Any, data: Any) -> Any:
    """Apply a user's input/output mapping: a callable, or a dict renaming keys (or tuple positions)."""
    if mapping is None:
        return data
    if callable(mapping):
        return mapping(data)
    if isinstance(data, Mapping):
        renamed = {mapping.get(key, key): value for key, value in data.items()}
        if len(renamed) < len(data):
            targets = [mapping.get(key, key) for key in data]
            clashes = sorted({str(t) for t in targets if targets.count(t) > 1})
            raise ValueError(
                f"The mapping {mapping} makes several keys collide on {clashes}: the batch keys "
                f"{sorted(map(str, data))} would overwrite each other. Map them onto distinct names."
            )
        return renamed
    if isinstance(data, (list, tuple)):
        return {mapping.get(index, index): value for index, value in enumerate(data)}
    return data
