"""Collect the ```python blocks of README.md and docs/**/*.md, with the marker that says how each runs.

Every block is preceded by an HTML comment (invisible on the rendered page):

- ``<!-- example: ENV -->`` runs the block as a script in the tox env ``ENV`` (``core``, a
  backend such as ``torch``, or its ``-dist`` env for blocks that start several processes);
- ``<!-- example: ENV, setup -->`` first star-imports ``tests/docs/setups/<backend>.py`` (or
  ``setup: NAME`` for ``setups/NAME.py``), which defines ``model``, ``train_loader``, ... ;
- ``<!-- example: ENV, continue -->`` runs after the previous block of the page, in its namespace
  (both become one script);
- ``<!-- example: ENV-dist, kernel -->`` runs as a cell of the real Jupyter kernel that
  ``tests/distributed/test_notebook.py`` starts for ENV (after its own checks), not as a script;
- ``<!-- example: ENV-dist, ray -->`` runs as a script that joins the test session's Ray cluster
  (``RAY_ADDRESS``; its ``ray.init()`` connects instead of starting one);
- ``<!-- example: signature: dotted.name -->``: the block is a call showing a signature; the test
  checks its parameters, order and defaults against the real object;
- ``<!-- example: skip: REASON -->``: not run; REASON must appear in the page's visible text next
  to the block, so the reader learns why too.

A block without a marker makes the collection test fail. Each runnable chain (a block and its
continuations) becomes one script, run in a fresh subprocess in a temporary folder; tracebacks
point at the page's lines.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

ROOT = Path(__file__).resolve().parents[2]
SETUPS = Path(__file__).resolve().parent / "setups"
BACKENDS = ("torch", "paddle", "jittor", "oneflow")
ENVS = ("core",) + BACKENDS + tuple(f"{name}-dist" for name in BACKENDS)
PYTHON_FENCES = ("python", "py", "python3")

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)")
_MARKER = re.compile(r"^\s*<!--\s*example:\s*(?P<body>.*?)\s*-->\s*$")
_COMMENT = re.compile(r"<!--.*?-->", re.S)


class MarkerError(ValueError):
    """A block's marker is missing or malformed."""


@dataclass
class Block:
    page: Path
    line: int                      # 1-based line of the opening fence
    code: str
    marker: Optional[str]          # the marker comment's body, None when missing
    kind: str = ""                 # "run", "signature" or "skip"
    env: str = ""                  # for "run": the tox env
    setup: Optional[str] = None    # for "run": the setup file's name
    continues: bool = False
    kernel: bool = False           # for "run": a cell of test_notebook's kernel, not a script
    ray: bool = False              # for "run": joins the session's Ray cluster
    argument: str = ""             # skip reason or signature target
    context: str = field(default="", repr=False)   # visible page text around the block

    @property
    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}"


def _shown(path: Path) -> str:
    """``path`` relative to the checkout when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def pages() -> list[Path]:
    """README.md and every markdown page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def read_blocks(page: Path) -> list[Block]:
    """Every python block of ``page`` with its marker (parsed; errors are raised by :func:`classify`)."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    spans: list[tuple[int, int]] = []       # (opening, closing) line indexes of every fence
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, indent = match.group("fence"), len(match.group("indent"))
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        spans.append((index, end))
        if match.group("info").lower() in PYTHON_FENCES:
            body = [line[indent:] if line[:indent].strip() == "" else line for line in lines[index + 1:end]]
            previous = index - 1
            while previous >= 0 and not lines[previous].strip():
                previous -= 1
            found = _MARKER.match(lines[previous]) if previous >= 0 else None
            blocks.append(Block(page, index + 1, "\n".join(body) + "\n", found.group("body") if found else None))
        index = end + 1
    for block in blocks:                    # the prose between the neighbouring fences
        position = [opening for opening, _ in spans].index(block.line - 1)
        start = spans[position - 1][1] + 1 if position > 0 else 0
        stop = spans[position + 1][0] if position + 1 < len(spans) else len(lines)
        prose = "\n".join(lines[start:block.line - 1] + lines[spans[position][1] + 1:stop])
        block.context = " ".join(_COMMENT.sub(" ", prose).replace("`", "").split())
    return blocks


def classify(block: Block) -> Block:
    """Fill ``kind``, ``env``, ... from the marker; :class:`MarkerError` when it is missing or wrong."""
    if block.marker is None:
        raise MarkerError(f"{block.where}: a python block without a marker. Put <!-- example: ENV --> "
                          f"(ENV one of {', '.join(ENVS)}; add ', setup' or ', continue' as needed), "
                          "<!-- example: signature: module.Name --> or <!-- example: skip: REASON --> on the "
                          "line before it (see tests/docs/examples.py).")
    body = block.marker
    if body.startswith(("skip:", "signature:")):
        block.kind, _, argument = body.partition(":")
        block.argument = argument.strip()
        if not block.argument:
            raise MarkerError(f"{block.where}: '{block.kind}:' needs {'a reason' if block.kind == 'skip' else 'a name'}.")
        if block.kind == "skip":
            reason = " ".join(block.argument.replace("`", "").split())
            if reason not in block.context:
                raise MarkerError(f"{block.where}: the skip reason {reason!r} must also be in the page's text next "
                                  "to the block, where the reader sees it.")
        return block
    parts = [part.strip() for part in body.split(",")]
    block.kind, block.env = "run", parts[0]
    if block.env not in ENVS:
        raise MarkerError(f"{block.where}: unknown env {block.env!r} in <!-- example: {body} -->; "
                          f"use one of {', '.join(ENVS)}, 'skip: REASON' or 'signature: NAME'.")
    for option in parts[1:]:
        name, _, value = (piece.strip() for piece in option.partition(":"))
        if name == "setup":
            block.setup = value or block.env.split("-")[0]
            if not (SETUPS / f"{block.setup}.py").is_file():
                raise MarkerError(f"{block.where}: no setup file tests/docs/setups/{block.setup}.py.")
        elif name == "continue" and not value:
            block.continues = True
        elif name == "kernel" and not value:
            if not block.env.endswith("-dist"):
                raise MarkerError(f"{block.where}: 'kernel' blocks run in a -dist env's notebook test; mark it ENV-dist.")
            block.kernel = True
        elif name == "ray" and not value:
            block.ray = True
        else:
            raise MarkerError(f"{block.where}: unknown option {option!r} in <!-- example: {body} -->; "
                              "use 'setup', 'setup: NAME', 'continue', 'kernel' or 'ray'.")
    if block.continues and block.setup:
        raise MarkerError(f"{block.where}: a 'continue' block runs after the previous one; its setup belongs there.")
    return block


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in read_blocks(page)]


@dataclass
class Chain:
    """A runnable block and the blocks continuing it: one script, one subprocess."""
    env: str
    blocks: list[Block]

    @property
    def id(self) -> str:
        return self.blocks[0].where

    @property
    def kernel(self) -> bool:
        """Run as a cell of the notebook test's kernel (``kernel`` marker), not as a script."""
        return self.blocks[0].kernel

    @property
    def ray(self) -> bool:
        """Join the test session's Ray cluster (``ray`` marker)."""
        return self.blocks[0].ray

    def script(self) -> tuple[str, list[tuple[str, int]]]:
        """The script text, and for each of its lines the (file, line) it comes from."""
        pieces: list[tuple[str, int, str]] = []
        setup = self.blocks[0].setup
        if setup:   # imported, so its own tracebacks name its file; needs the checkout on PYTHONPATH
            pieces.append((f"tests/docs/setups/{setup}.py", 1, f"from tests.docs.setups.{setup} import *\n"))
        for block in self.blocks:
            pieces.append((_shown(block.page), block.line + 1, block.code))
        text, origin = [], []
        for source, first, code in pieces:
            for offset, line in enumerate(code.rstrip("\n").split("\n")):
                text.append(line)
                origin.append((source, first + offset))
        return "\n".join(text) + "\n", origin


def chains(blocks: list[Block]) -> Iterator[Chain]:
    """Group classified blocks into chains; a 'continue' needs a runnable block before it on its page."""
    current: Optional[Chain] = None
    for block in blocks:
        if block.kind != "run":
            continue                   # skipped and signature blocks leave the chain as it is
        if block.continues:
            if current is None or current.blocks[-1].page != block.page:
                raise MarkerError(f"{block.where}: 'continue' but no runnable block before it on this page.")
            if current.env != block.env:
                raise MarkerError(f"{block.where}: continues a {current.env} block but is marked {block.env}.")
            current.blocks.append(block)
            continue
        if current is not None:
            yield current
        current = Chain(block.env, [block])
    if current is not None:
        yield current


def kernel_chains(backend: str) -> list[Chain]:
    """The chains of ``backend``'s -dist env marked ``kernel``: tests/distributed/test_notebook.py runs them."""
    blocks = [classify(block) for block in all_blocks()]
    return [chain for chain in chains(blocks) if chain.kernel and chain.env == f"{backend}-dist"]


def relabel_traceback(output: str, script: Path, origin: list[tuple[str, int]]) -> str:
    """Point traceback lines of the generated script at the markdown (or setup) lines they came from."""
    def replace(match: re.Match) -> str:
        number = int(match.group(2))
        if 1 <= number <= len(origin):
            source, line = origin[number - 1]
            return f'File "{source}", line {line}'
        return match.group(0)
    return re.sub(r'File "(%s)", line (\d+)' % re.escape(str(script)), replace, output)


def main() -> None:
    """Print the blocks per page and per env (``python -m tests.docs.examples``)."""
    from collections import Counter
    totals: Counter = Counter()
    for page in pages():
        counts: Counter = Counter()
        for block in read_blocks(page):
            try:
                classify(block)
                counts[block.env if block.kind == "run" else block.kind] += 1
            except MarkerError:
                counts["UNMARKED"] += 1
        if counts:
            totals.update(counts)
            print(f"{_shown(page):32} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"{'total':32} " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())) + f" ({sum(totals.values())} blocks)")


if __name__ == "__main__":
    main()
