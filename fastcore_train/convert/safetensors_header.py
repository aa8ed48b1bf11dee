"""A safetensors file's header, checked against the file's size before anything else is read.

The format is an 8-byte little-endian header length, a JSON header (each tensor's dtype, shape and
byte range; ``__metadata__``) and the tensors' bytes. A damaged or hostile header can claim a header
or tensors of many gigabytes in a small file; a reader that trusts it allocates that much (16 GB:
"Cannot allocate memory") or reads the whole file before a missing name is found. Here every claim
is compared with the file's real size first, so such a file is a ``ValueError`` naming it, at the
cost of reading the header alone.
"""
from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

#: safetensors' own limit on the header's size.
MAX_HEADER_BYTES = 100 * 1024 * 1024
_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
                "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}


def _damaged(path: Path, why: str) -> ValueError:
    return ValueError(f"{str(path)!r} is damaged or not a safetensors file: {why}. Nothing of it was loaded; write "
                      "it again (save_neutral_weights, convert --to neutral) or use another copy.")


def read_header(path: os.PathLike) -> dict[str, Any]:
    """The header of the safetensors file at ``path`` (tensor names to ``dtype``/``shape``/
    ``data_offsets``, and ``__metadata__``), once every size it claims fits the file."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        start = handle.read(8)
        if len(start) < 8:
            raise _damaged(path, f"it has {size} bytes, fewer than the 8 of a header length")
        length = struct.unpack("<Q", start)[0]
        if length > size - 8 or length > MAX_HEADER_BYTES:
            raise _damaged(path, f"its header claims {length:,} bytes, but the file has {size:,}")
        try:
            header = json.loads(handle.read(length))
        except ValueError as error:
            raise _damaged(path, f"its header is no JSON ({error})") from None
    if not isinstance(header, dict):
        raise _damaged(path, "its header is no JSON object")
    data_bytes = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            count = math.prod(int(side) for side in shape)
            valid = dtype in _DTYPE_BYTES and all(int(side) >= 0 for side in shape) and 0 <= begin <= end
        except (KeyError, TypeError, ValueError):
            raise _damaged(path, f"its header's entry for {name!r} is not a tensor's (dtype, shape, data_offsets)") \
                from None
        if not valid:
            raise _damaged(path, f"its header's entry for {name!r} is not a tensor's (dtype, shape, data_offsets)")
        if end > data_bytes:
            raise _damaged(path, f"its header claims {end:,} bytes of tensor data ({name!r} ends there), but the file "
                                 f"holds {data_bytes:,} after its header")
        if end - begin != count * _DTYPE_BYTES[dtype]:
            raise _damaged(path, f"its header gives {name!r} {end - begin:,} bytes for a {dtype} tensor of shape "
                                 f"{list(shape)}, which takes {count * _DTYPE_BYTES[dtype]:,}")
    return header
