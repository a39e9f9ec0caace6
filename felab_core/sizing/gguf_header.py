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
#: No key or tensor is named in more than this many bytes.
_MAX_NAME = 65_536
#: Budgets past any real model (one has ~50 keys, up to tens of thousands of tensors, and a
#: tokenizer of a few hundred thousand strings), so a crafted header of honest counts cannot
#: take minutes or gigabytes: 34 million empty nested arrays in 409 MB ran past 30 s.
MAX_KEYS = 100_000
MAX_TENSORS = 500_000
MAX_ITEMS_WALKED = 8_000_000
MAX_ITEMS_KEPT = 65_536
_DAMAGED = "its header claims more metadata than the file holds (damaged or cut short)"


class GGUFHeaderError(ValueError):
    """The header cannot be what it claims; the message says why, without the file's name.
    `cut_short` when the likely cause is a partial download (another copy helps); otherwise
    the file was written wrongly or by something newer, and downloading it again will not."""

    def __init__(self, message: str, *, cut_short: bool = False) -> None:
        super().__init__(message)
        self.cut_short = cut_short


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
    #: ggml's order, innermost first: an expert tensor lists the expert axis last.
    dims: tuple[int, ...] = ()


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


class _Odd(Exception):
    """A value no GGUF writer makes (its words; the caller adds the key's name)."""


class _Walker:
    """Reads GGUF's header fields in order, refusing any that runs past the end."""

    def __init__(self, data: mmap.mmap | bytes, order: str) -> None:
        self.data, self.order, self.at, self.end = data, order, 0, len(data)
        self._u64 = struct.Struct(order + "Q").unpack_from
        self.walked = 0  # strings and nested arrays stepped over, against MAX_ITEMS_WALKED
        self.kept = 0  # numbers kept in short arrays, against MAX_ITEMS_KEPT
        self.tensors_listed = 0

    def _walk(self, count: int) -> None:
        self.walked += count
        if self.walked > MAX_ITEMS_WALKED:
            raise _Odd(
                f"more than {MAX_ITEMS_WALKED:,} strings and arrays in arrays, past any "
                "model's tokenizer"
            )

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

    def name(self) -> str:
        """A key's or tensor's name: real ones are a few dozen bytes."""
        n = self.count()
        if n > _MAX_NAME:
            if self.at + n > self.end:
                raise _Short
            raise GGUFHeaderError(f"it holds a key or tensor name of {n:,} bytes")
        return self.raw(n).decode("utf-8", "replace")

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
        if kind != _ARRAY:
            raise _Odd(f"has the value type {kind}, which GGUF does not define")
        if depth >= _MAX_DEPTH:
            raise _Odd(f"nests arrays more than {_MAX_DEPTH} deep")
        item, count = self.take("I"), self.count()
        code = _FIXED.get(item)
        if code is None and item not in (_STRING, _ARRAY):
            raise _Odd(f"is an array of the value type {item}, which GGUF does not define")
        least = struct.calcsize(code) if code else 8  # a string or array holds an 8-byte count
        if count * least > self.left():
            raise _Short
        if code is not None and count <= _KEEP_ITEMS and self.kept + count <= MAX_ITEMS_KEPT:
            self.kept += count
            values = struct.unpack_from(f"{self.order}{count}{code}", self.data, self.at)
            self.at += count * least
            return list(values)
        if code is not None:
            self.skip(count * least)
        elif item == _STRING:
            self._walk(count)
            self._skip_strings(count)
        else:
            self._walk(count)
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
    with path.open("rb") as fh:
        if fh.seek(0, 2) < 24:
            raise GGUFHeaderError("its header is cut short", cut_short=True)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            version, order = _version(bytes(data[:8]))
            if version not in SUPPORTED_VERSIONS:
                raise GGUFHeaderError(f"it is GGUF version {version}")
            walk = _Walker(data, order)
            walk.skip(8)
            try:
                fields = _fields(walk)
                dims: dict[str, tuple[int, ...]] = {}
                listed = _tensors(walk, fields, dims)
            except _Short:
                raise GGUFHeaderError(_DAMAGED, cut_short=True) from None
            _fit_in_file(listed, _data_start(walk.at, fields), walk.end)
    return GGUFHeader(
        version=version,
        fields=fields,
        tensors=tuple(GGUFTensor(name, n_bytes, dims.get(name, ())) for name, _, n_bytes in listed),
    )


def _fields(walk: _Walker) -> dict[str, Any]:
    n_tensors, n_pairs = walk.count(), walk.count()
    if n_pairs * 12 > walk.left() or n_tensors * 24 > walk.left():
        raise _Short  # a key takes at least 12 bytes, a tensor's entry 24
    if n_pairs > MAX_KEYS or n_tensors > MAX_TENSORS:
        raise GGUFHeaderError(
            f"it lists {n_pairs:,} metadata keys and {n_tensors:,} tensors, past any model "
            f"(felab reads up to {MAX_KEYS:,} and {MAX_TENSORS:,})"
        )
    walk.tensors_listed = n_tensors
    fields: dict[str, Any] = {}
    for _ in range(n_pairs):
        name = walk.name()
        if name in fields:
            raise DuplicateKey(name[:80])
        try:
            fields[name] = walk.value(walk.take("I"))
        except _Odd as exc:
            raise GGUFHeaderError(f"its metadata key {name[:80]!r} {exc}") from None
    return fields


def _tensors(
    walk: _Walker, fields: dict[str, Any], dims_of: dict[str, tuple[int, ...]]
) -> list[tuple[str, int, int]]:
    """(name, offset, bytes) of each tensor the header lists; each one's dims into `dims_of`."""
    from gguf.constants import GGML_QUANT_SIZES

    listed: list[tuple[str, int, int]] = []
    names: set[str] = set()
    for _ in range(walk.tensors_listed):
        tensor = walk.name()
        if tensor in names:
            raise GGUFHeaderError(f"it lists the tensor {tensor[:80]!r} twice")
        names.add(tensor)
        dims = walk.take("I")
        if dims > _MAX_DIMS:
            raise GGUFHeaderError(f"its tensor {tensor[:80]!r} claims {dims} dimensions")
        dims_of[tensor] = tuple(walk.count() for _ in range(dims))
        elements = math.prod(dims_of[tensor])
        kind, offset = walk.take("I"), walk.count()
        sizes = GGML_QUANT_SIZES.get(kind)
        if sizes is None:
            raise GGUFHeaderError(
                f"its tensor {tensor[:80]!r} has the type number {kind}, which felab's gguf "
                "package does not know (a newer quantisation?)"
            )
        block, per_block = sizes
        listed.append((tensor, offset, elements * per_block // block))
    return listed


def _data_start(header_end: int, fields: dict[str, Any]) -> int:
    align = fields.get("general.alignment", 32)
    if not isinstance(align, int) or isinstance(align, bool) or align < 1:
        raise GGUFHeaderError("its general.alignment is not a positive whole number")
    if align & (align - 1) or align > 1 << 20:
        raise GGUFHeaderError(f"its general.alignment {align} is not a power of two to 1 MiB")
    return -(-header_end // align) * align


def _fit_in_file(listed: list[tuple[str, int, int]], start: int, end: int) -> None:
    """Each tensor's bytes lie inside the file and apart from every other's: 1,000 tensors all
    at offset 0 of a 1 MiB file were priced as 1 GB of weights."""
    previous_end, previous = 0, ""
    for tensor, offset, n_bytes in sorted(listed, key=lambda t: t[1]):
        if start + offset + n_bytes > end:
            raise GGUFHeaderError(
                f"its tensor {tensor[:80]!r} runs past the end of the file (damaged or cut short)",
                cut_short=True,
            )
        if n_bytes and offset < previous_end:
            raise GGUFHeaderError(
                f"its tensors {previous[:80]!r} and {tensor[:80]!r} share bytes (a tensor list "
                "no converter writes)"
            )
        if n_bytes:
            previous_end, previous = offset + n_bytes, tensor
