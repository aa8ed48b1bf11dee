"""A griffe extension for the API reference: render the few reST constructs our docstrings use.

The docstrings are written in Sphinx style (``:param x:`` fields, ``:class:`Name``` roles,
``text::`` literal blocks). mkdocstrings parses the fields itself; this turns roles into inline
code (``:class:`~a.b.Driver``` -> ```Driver```, ``:mod:`a.b``` -> ```a.b```) and ``text::``
before an indented block into ``text:``, whose block Markdown already shows as code.
Loaded from mkdocs.yml (``extensions:``); it only rewrites docstring text, never the code.
"""
from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`<]*?)(?:\s*<([^>`]+)>)?`")
_LITERAL_BLOCK = re.compile(r"(\S)::[ \t]*$", re.MULTILINE)


def _role(match: re.Match[str]) -> str:
    short, text, target = match.group(1), match.group(2).strip(), match.group(3)
    if target:  # :ref:`label <target>` style: show the label
        return f"`{text}`"
    if short:
        text = text.rsplit(".", 1)[-1]
    return f"`{text}`"


def rewrite(text: str) -> str:
    """The docstring ``text`` with reST roles and literal-block markers made Markdown."""
    return _LITERAL_BLOCK.sub(r"\1:", _ROLE.sub(_role, text))


class RstRoles(griffe.Extension):
    """Rewrite every docstring as :func:`rewrite` says, as objects are loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
