"""JSON objects read with each key once: `json` keeps the last of two, silently, and which of
two figures a file meant is a guess. Files felab reads from outside (bench records, traces,
model configs) are refused instead, naming the key."""

from __future__ import annotations

from collections import Counter
from typing import Any


class KeyTwice(ValueError):
    """An object holds one key twice; the key is the argument."""

    @property
    def key(self) -> str:
        return str(self.args[0])


def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An `object_pairs_hook` for json.loads: the object, or KeyTwice."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise KeyTwice(next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1))
    return obj
