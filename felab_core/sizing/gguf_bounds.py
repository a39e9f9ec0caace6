"""Checking a GGUF file's metadata sizes against the file before the gguf reader trusts them.

The reader believes each array's element count: a 49-byte file claiming an array of 10^7 (or
2^62) numbers made it allocate until the machine ran out of memory. Every count here is held
to the bytes that are left, so a damaged or hostile header is refused at once.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

#: Bytes per element of GGUF's fixed-size value types (8: string, 9: array are walked).
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
#: Arrays of arrays deeper than this are no model's metadata.
_MAX_DEPTH = 4


class _Short(Exception):
    """The header claims more than the file holds."""


class _Walker:
    """Reads GGUF's header fields in order, refusing any that runs past the end."""

    def __init__(self, data: mmap.mmap | bytes, order: str) -> None:
        self.data, self.order, self.at = data, order, 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise _Short
        (value,) = struct.unpack_from(self.order + fmt, self.data, self.at)
        self.at += size
        return int(value)

    def skip(self, n: int) -> None:
        if n < 0 or self.at + n > len(self.data):
            raise _Short
        self.at += n

    def left(self) -> int:
        return len(self.data) - self.at

    def value(self, kind: int, depth: int = 0) -> None:
        if kind in _FIXED:
            self.skip(_FIXED[kind])
        elif kind == _STRING:
            self.skip(self.take("Q"))
        elif kind == _ARRAY and depth < _MAX_DEPTH:
            item, count = self.take("I"), self.take("Q")
            least = _FIXED.get(item, 8)  # a string or an array takes at least its 8-byte count
            if count * least > self.left():
                raise _Short
            if item in _FIXED:
                self.skip(count * _FIXED[item])
            else:
                for _ in range(count):
                    self.value(item, depth + 1)
        else:
            raise _Short


def header_problem(path: Path) -> str | None:
    """Why the GGUF header at `path` cannot be what it claims (None when its metadata fits the
    file). Reads only the metadata, through a memory map: a model of many GB costs nothing."""
    with path.open("rb") as fh:
        size = fh.seek(0, 2)
        if size < 24:
            return "its header is cut short"
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            version = int.from_bytes(data[4:8], "little")
            order = ">" if version & 0xFFFF == 0 else "<"  # written big-endian
            walk = _Walker(data, order)
            walk.skip(8)
            try:
                tensors, pairs = walk.take("Q"), walk.take("Q")
                if pairs * 12 > walk.left() or tensors * 24 > walk.left():
                    raise _Short  # a key takes at least 12 bytes, a tensor's entry 24
                for _ in range(pairs):
                    walk.skip(walk.take("Q"))  # the key's name
                    walk.value(walk.take("I"))
            except _Short:
                return "its header claims more metadata than the file holds (damaged or cut short)"
    return None
