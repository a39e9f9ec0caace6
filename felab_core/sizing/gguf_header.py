"""Reading a GGUF file's metadata and tensor list without trusting its counts.

felab needs a dozen numbers from a GGUF header and the size of each tensor. The gguf package's
reader builds a numpy view for every element of every metadata array: a Llama 3 tokenizer's
header (128,256 tokens, 280,147 merges) cost 9 s and 700 MB, and 16 MB of two million empty
strings 40 s and 3 GB. This walker reads the header once, in order, through a memory map: every
count is held to the bytes left in the file (a 49-byte file claiming 2^62 numbers is refused at
once), scalars and short number arrays (per-layer head counts) are kept, and long or string
arrays are stepped over by their declared lengths.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: GGUF versions this walker reads (1 used 32-bit counts and is long gone).
SUPPORTED_VERSIONS = (2, 3)
#: struct codes of GGUF's fixed-size value types (8: string and 9: array are walked).
_FIXED = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9
#: Arrays of arrays deeper than this are no model's metadata.
_MAX_DEPTH = 4
#: Number arrays longer than this are stepped over (a per-layer count has one per layer).
_KEEP_ITEMS = 4096
#: Strings longer than this are stepped over: no name or architecture is a megabyte long.
_KEEP_TEXT = 1 << 20
#: ggml keeps at most four dimensions per tensor.
_MAX_DIMS = 4
_DAMAGED = "its header claims more metadata than the file holds (damaged or cut short)"


class GGUFHeaderError(ValueError):
    """The header cannot be what it claims; the message says why, without the file's name."""


class DuplicateKey(GGUFHeaderError):
    """The same metadata key written twice (a converter's bug, not a cut-short download)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the metadata key {key} is written twice")
        self.key = key


@dataclass(frozen=True)
class _Skipped:
    """A value stepped over: an array too long, or of strings, or text too long to keep."""

    what: str


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    n_bytes: int


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    fields: dict[str, Any]
    tensors: tuple[GGUFTensor, ...]

    def value(self, key: str) -> Any:
        """The key's value as int, float, bool, str or list of numbers; None when absent.
        Raises GGUFHeaderError for text that is not UTF-8 or a value too long to be a shape."""
        found = self.fields.get(key)
        if isinstance(found, _Skipped):
            raise GGUFHeaderError(f"{key} is {found.what}, not a model's shape")
        if isinstance(found, bytes):
            try:
                return found.decode("utf-8")
            except UnicodeDecodeError:
                raise GGUFHeaderError(f"{key} is not UTF-8 text") from None
        return found


class _Short(Exception):
    """The header claims more than the file holds."""


class _Walker:
    """Reads GGUF's header fields in order, refusing any that runs past the end."""

    def __init__(self, data: mmap.mmap | bytes, order: str) -> None:
        self.data, self.order, self.at, self.end = data, order, 0, len(data)
        self._u64 = struct.Struct(order + "Q").unpack_from

    def take(self, code: str) -> Any:
        size = struct.calcsize(code)
        if self.at + size > self.end:
            raise _Short
        (value,) = struct.unpack_from(self.order + code, self.data, self.at)
        self.at += size
        return value

    def count(self) -> int:
        if self.at + 8 > self.end:
            raise _Short
        (value,) = self._u64(self.data, self.at)
        self.at += 8
        return int(value)

    def raw(self, n: int) -> bytes:
        if self.at + n > self.end:
            raise _Short
        self.at += n
        return bytes(self.data[self.at - n : self.at])

    def skip(self, n: int) -> None:
        if self.at + n > self.end:
            raise _Short
        self.at += n

    def left(self) -> int:
        return self.end - self.at

    def text(self) -> bytes | _Skipped:
        n = self.count()
        if n > _KEEP_TEXT:
            self.skip(n)
            return _Skipped(f"text of {n:,} bytes")
        return self.raw(n)

    def value(self, kind: int, depth: int = 0) -> Any:
        if kind in _FIXED:
            return self.take(_FIXED[kind])
        if kind == _STRING:
            return self.text()
        if kind != _ARRAY or depth >= _MAX_DEPTH:
            raise _Short  # no such type: the bytes are not a header
        item, count = self.take("I"), self.count()
        code = _FIXED.get(item)
        least = struct.calcsize(code) if code else 8  # a string or array holds an 8-byte count
        if count * least > self.left():
            raise _Short
        if code is not None and count <= _KEEP_ITEMS:
            values = struct.unpack_from(f"{self.order}{count}{code}", self.data, self.at)
            self.at += count * least
            return list(values)
        if code is not None:
            self.skip(count * least)
        elif item == _STRING:
            self._skip_strings(count)
        else:
            for _ in range(count):
                self.value(item, depth + 1)
        return _Skipped(f"an array of {count:,} items")

    def _skip_strings(self, count: int) -> None:
        """Steps over `count` strings: the loop a tokenizer's vocabulary spends its time in."""
        data, u64, at, end = self.data, self._u64, self.at, self.end
        for _ in range(count):
            if at + 8 > end:
                raise _Short
            at += 8 + u64(data, at)[0]
        if at > end:
            raise _Short
        self.at = at


def _version(head: bytes) -> tuple[int, str]:
    """The version and byte order: a big-endian file's version reads as a multiple of 65536."""
    little = int.from_bytes(head[4:8], "little")
    if little & 0xFFFF == 0:
        return int.from_bytes(head[4:8], "big"), ">"
    return little, "<"


def read_header(path: Path) -> GGUFHeader:
    """The metadata and tensor sizes of the GGUF file at `path` (which starts with GGUF).
    Reads only the header, through a memory map: a model of many GB costs nothing."""
    from gguf.constants import GGML_QUANT_SIZES

    with path.open("rb") as fh:
        if fh.seek(0, 2) < 24:
            raise GGUFHeaderError("its header is cut short")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            version, order = _version(bytes(data[:8]))
            if version not in SUPPORTED_VERSIONS:
                raise GGUFHeaderError(f"it is GGUF version {version}")
            walk = _Walker(data, order)
            walk.skip(8)
            try:
                n_tensors, n_pairs = walk.count(), walk.count()
                if n_pairs * 12 > walk.left() or n_tensors * 24 > walk.left():
                    raise _Short  # a key takes at least 12 bytes, a tensor's entry 24
                fields: dict[str, Any] = {}
                for _ in range(n_pairs):
                    name = walk.raw(walk.count()).decode("utf-8", "replace")
                    if name in fields:
                        raise DuplicateKey(name[:80])
                    fields[name] = walk.value(walk.take("I"))
                listed: list[tuple[str, int, int]] = []
                for _ in range(n_tensors):
                    tensor = walk.raw(walk.count()).decode("utf-8", "replace")
                    dims = walk.take("I")
                    if dims > _MAX_DIMS:
                        raise GGUFHeaderError(f"tensor {tensor[:80]!r} claims {dims} dimensions")
                    elements = math.prod(walk.count() for _ in range(dims))
                    kind, offset = walk.take("I"), walk.count()
                    sizes = GGML_QUANT_SIZES.get(kind)
                    if sizes is None:
                        raise GGUFHeaderError(
                            f"tensor {tensor[:80]!r} has the type number {kind}, which felab's "
                            "gguf package does not know (a newer quantisation?)"
                        )
                    block, per_block = sizes
                    listed.append((tensor, offset, elements * per_block // block))
            except _Short:
                raise GGUFHeaderError(_DAMAGED) from None
            align = fields.get("general.alignment", 32)
            if not isinstance(align, int) or isinstance(align, bool) or align < 1:
                raise GGUFHeaderError("its general.alignment is not a positive whole number")
            if align & (align - 1):
                raise GGUFHeaderError(f"its general.alignment {align} is not a power of two")
            start = -(-walk.at // align) * align
            for tensor, offset, n_bytes in listed:
                if start + offset + n_bytes > walk.end:
                    raise GGUFHeaderError(
                        f"its tensor {tensor[:80]!r} runs past the end of the file (damaged or "
                        "cut short)"
                    )
    return GGUFHeader(
        version=version,
        fields=fields,
        tensors=tuple(GGUFTensor(name, n_bytes) for name, _, n_bytes in listed),
    )
