"""The weight bytes of safetensors files, from their headers, with every claim held to the file.

A safetensors file is an 8-byte header length, a JSON object of tensors (dtype, shape and
`data_offsets` into the data that follows), then the data. felab prices a model by the bytes
its tensors hold, so a header is believed only where it agrees with itself and the file: the
offsets lie inside the data and apart from each other, and a known dtype times the shape is
the span the offsets give. A 100-byte file claiming 16 GB, or 1,000 tensors at one offset,
had been priced as a 16 GB model.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

from felab_core.files import MiB, NamedFileError, refuse_special
from felab_core.json_keys import KeyTwice, once
from felab_core.sizing.errors import SizingError
from felab_core.text import with_hidden_shown

#: Real headers are kilobytes to a few megabytes (a shard of a mixture of experts); a 94 MB one
#: took 15 s and 1.4 GB to parse, so each is held to this and all of a folder's to the total.
MAX_HEADER_BYTES = 16 * MiB
MAX_TOTAL_HEADER_BYTES = 32 * MiB
#: Bits per element of the dtypes safetensors writes; others are read by their offsets alone.
_DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}


def _refused(path: Path, why: str) -> SizingError:
    return SizingError(
        f"cannot read the safetensors header of {path}: {why}; is the file complete and a "
        "safetensors file?"
    )


def _header(path: Path, budget: int) -> tuple[dict[str, Any], int, int]:
    """The header object, its length in bytes, and the length of the data after it."""
    try:
        refuse_special(path, what="safetensors file")  # a FIFO had hung --config for good
    except NamedFileError as exc:
        raise SizingError(str(exc)) from None
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if len(head) < 8:
                raise SizingError(f"{path} is too short to be a safetensors file")
            (length,) = struct.unpack("<Q", head)
            if length > min(MAX_HEADER_BYTES, budget):
                raise _refused(
                    path,
                    f"its header claims {length:,} bytes (felab reads up to "
                    f"{MAX_HEADER_BYTES // MiB} MiB a file, {MAX_TOTAL_HEADER_BYTES // MiB} MiB "
                    "a folder; a real one is far smaller)",
                )
            if 8 + length > size:
                raise _refused(path, f"its header claims {length:,} bytes, past the file's end")
            raw = fh.read(length)
    except OSError as exc:
        raise SizingError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=once)
    except UnicodeDecodeError:
        raise _refused(path, "it is not UTF-8 text") from None
    except KeyTwice as exc:
        raise _refused(path, f"it names {with_hidden_shown(exc.key[:60])} twice") from None
    except json.JSONDecodeError as exc:
        raise _refused(path, f"it is not JSON ({exc.msg})") from None
    except RecursionError:
        raise _refused(path, "it is nested too deeply to be a list of tensors") from None
    except ValueError:  # an integer of thousands of digits (Python reads at most 4,300)
        raise _refused(path, "it holds a number of thousands of digits") from None
    if not isinstance(header, dict):
        raise _refused(path, f"it is a JSON {type(header).__name__}, not an object of tensors")
    return header, length, size - 8 - length


#: The most dimensions a tensor's shape may list: models use up to 5; 100,000 dimensions of
#: 2**62 each took math.prod past 30 s (and 17 overflowed a float).
_MOST_DIMS = 16


def _span(path: Path, tensor: str, info: dict[str, Any], data_bytes: int) -> tuple[int, int]:
    """The tensor's [start, end) in the data, checked against its dtype, shape and the file."""
    name = with_hidden_shown(str(tensor)[:60])
    offsets = info.get("data_offsets", [0, 0])
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(o) is int and 0 <= o < 2**63 for o in offsets)
        and offsets[0] <= offsets[1]
    ):
        raise _refused(
            path, f"tensor {name} has data_offsets {str(offsets)[:60]}, not [start, end] in bytes"
        )
    start, end = offsets
    if end > data_bytes:
        raise _refused(
            path,
            f"tensor {name} ends at byte {end:,} of the data, and the file holds {data_bytes:,} "
            "(cut short, or a header that lies)",
        )
    bits, shape = _DTYPE_BITS.get(str(info.get("dtype"))), info.get("shape")
    if bits is not None and isinstance(shape, list):
        if len(shape) > _MOST_DIMS or not all(type(n) is int and 0 <= n < 2**63 for n in shape):
            raise _refused(
                path,
                f"tensor {name} has the shape {str(shape)[:60]}"
                + (f" ({len(shape):,} dimensions)" if len(shape) > _MOST_DIMS else ""),
            )
        expected = (math.prod(shape) * bits + 7) // 8  # whole numbers: no float to overflow
        if expected != end - start:
            raise _refused(
                path,
                f"tensor {name} is {info.get('dtype')} {str(shape)[:60]}, "
                + (f"{expected:,} bytes" if expected < 2**63 else "more bytes than any file")
                + f", but its offsets span {end - start:,}",
            )
    return start, end


def tensor_bytes(files: list[Path]) -> dict[str, int]:
    """Tensor name -> bytes across the files (a model's shards)."""
    return {name: n_bytes for name, (n_bytes, _) in tensor_table(files).items()}


def _dims(info: dict[str, Any]) -> tuple[int, ...]:
    """The tensor's shape where it is a short list of whole numbers, else () (not read)."""
    shape = info.get("shape")
    if isinstance(shape, list) and len(shape) <= _MOST_DIMS and all(type(n) is int for n in shape):
        return tuple(shape)
    return ()


def tensor_table(files: list[Path]) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Tensor name -> (bytes, shape) across the files (a model's shards)."""
    sizes: dict[str, tuple[int, tuple[int, ...]]] = {}
    shard_of: dict[str, Path] = {}
    read = 0
    for path in files:
        header, length, data_bytes = _header(path, MAX_TOTAL_HEADER_BYTES - read)
        read += length
        spans: list[tuple[int, int, str]] = []
        for tensor, info in header.items():
            if tensor == "__metadata__" or not isinstance(info, dict):
                continue
            start, end = _span(path, tensor, info, data_bytes)
            if tensor in shard_of:  # the last shard's size had won without a word
                raise _refused(
                    path,
                    f"tensor {with_hidden_shown(tensor[:60])} is also in "
                    f"{shard_of[tensor].name}: a model's shards hold each tensor once (a copy "
                    "of another download in the folder?)",
                )
            shard_of[tensor] = path
            sizes[tensor] = (end - start, _dims(info))
            if end > start:
                spans.append((start, end, tensor))
        spans.sort()
        reach, holder = 0, ""
        for start, end, tensor in spans:  # 1,000 tensors at one offset were 1,000 tensors' bytes
            if start < reach:
                raise _refused(
                    path,
                    f"tensors {with_hidden_shown(holder[:60])} and "
                    f"{with_hidden_shown(tensor[:60])} share bytes",
                )
            reach, holder = end, tensor
    return sizes
