"""The seal felab puts on every bench record it writes, and its check when a record is read.

Why: `felab compare` had taken hand-edited records (a nudged float, shuffled gaps, a deleted
field), and each field check added found the next edit. The seal is "sha256:" and the digest of
the record's canonical JSON (sorted keys, no spaces, ASCII, no NaN) without its "seal" key: any
edit or corruption after felab wrote the file makes it disagree. It is no signature: someone who
recomputes it on purpose passes, and the fleet's trust boundary is the ingest's job checks, not
this. A record without a seal (an older felab's, another tool's) or with one that does not match
is compared only on purpose (`felab compare --unsealed`), field by field.

felab writes the record so that its canonical JSON is its text, top-level members sorted and
line breaks left out: checking the seal of a record of 200,000 requests takes under a second,
not the twenty a second writing of its numbers would (a record reformatted since is still
checked, that slower way).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

SEAL_KEY = "seal"
PREFIX = "sha256:"
#: Where load_record leaves what a record's seal said (a SealState): always set by the reader,
#: never taken from the file.
SEAL_STATE = "felab:seal"


class SealState(StrEnum):
    """What a record's seal says of it."""

    sealed = "sealed"  # the seal matches the contents
    unsealed = "unsealed"  # no seal (an older felab's record, another tool's, a hand's)
    changed = "changed"  # a seal that does not match: edited or damaged after felab wrote it


def _canonical(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def seal_of(record: dict[str, Any]) -> str:
    """The seal of a record (as read back from JSON): its "seal" key left out."""
    body = _canonical({k: v for k, v in record.items() if k != SEAL_KEY})
    return PREFIX + hashlib.sha256(body.encode("ascii")).hexdigest()


def sealed_text(record: dict[str, Any]) -> str:
    """A record as felab writes it, sealed: each top-level member on a line of its own, in
    the record's order ("schema" first) and the seal last; a list there (the runs, the
    warm-up) one item a line; each value's JSON canonical (keys sorted, no spaces). So the
    canonical JSON is the text's members sorted, without its line breaks (_quick_digest).

    Every key must be a string, as JSON's are (results._clean makes them so): the seal is
    taken from the text, and JSON would sort 2 before 10 where the reader sorts "10" first.
    ValueError for NaN or infinity (write null instead, as results._clean does)."""
    members = []
    for key, value in record.items():
        if key == SEAL_KEY:
            continue
        if isinstance(value, list | tuple) and value:
            shown = "[\n" + ",\n".join(_canonical(item) for item in value) + "\n]"
        else:
            shown = _canonical(value)
        members.append(f" {_canonical(key)}:{shown}")
    members.append(f' "{SEAL_KEY}":""')  # a stand-in, so the text is in its final layout
    text = "{\n" + ",\n".join(members) + "\n}\n"
    seal = _quick_digest(text, {*record, SEAL_KEY})
    if seal is None:  # a key that is not plain words: the whole record read back, sealed
        seal = seal_of(json.loads(text))
    members[-1] = f' "{SEAL_KEY}":"{seal}"'
    return "{\n" + ",\n".join(members) + "\n}\n"


#: How much of a record's text is hashed at a time (bounds the copies made).
_PIECE = 16 * 1024 * 1024


def _quick_digest(text: str, keys: set[str]) -> str | None:
    """The seal of a record in felab's own layout (sealed_text), from its text, without
    writing its numbers again: its top-level members (each on a line that starts with one
    space) sorted, without their line breaks (JSON's strings hold none raw). None when the
    text is in another layout (reformatted by an editor, say): then the record is written
    out again canonically. The members found must be the record's own keys, each once."""
    if not (text.startswith('{\n "') and text.endswith("\n}\n")):
        return None
    cuts = [1]  # where each top-level member starts: the "\n" before its line
    while (at := text.find(',\n "', cuts[-1] + 1)) != -1:
        cuts.append(at + 1)
    ends = [c - 1 for c in cuts[1:]] + [len(text) - 3]  # before each "," and the last "\n}"
    members = []
    for start, end in zip(cuts, ends, strict=True):
        key_end = text.find('":', start + 3, end)
        key = text[start + 3 : key_end]
        if key_end == -1 or "\\" in key or '"' in key:
            return None
        members.append((key, key_end + 2, end))
    found = [key for key, _, _ in members if key != SEAL_KEY]
    if len(found) != len(members) - 1 or sorted(found) != sorted(keys - {SEAL_KEY}):
        return None
    digest = hashlib.sha256(b"{")
    for n, (key, start, end) in enumerate(sorted(m for m in members if m[0] != SEAL_KEY)):
        digest.update(f'{"," if n else ""}"{key}":'.encode("ascii"))
        for at in range(start, end, _PIECE):
            try:
                digest.update(text[at : min(at + _PIECE, end)].replace("\n", "").encode("ascii"))
            except UnicodeEncodeError:  # felab writes ASCII: not its layout
                return None
    digest.update(b"}")
    return PREFIX + digest.hexdigest()


def parse_sealed(
    text: str,
    hook: Callable[[list[tuple[str, Any]]], dict[str, Any]],
    drop: Sequence[str] = (),
) -> tuple[Any, SealState]:
    """`json.loads(text)` with `hook` making each object and the keys in `drop` left out of
    every object (bulky lists a reader never uses), and what the record's seal says.

    A record in felab's own layout is checked from its text (about as long as reading it);
    one in another layout (an editor reformatted it) is read again whole and written out
    canonically. json.JSONDecodeError, ValueError and RecursionError pass through as from
    json.loads."""

    def slim(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = hook(pairs)
        for key in drop:
            obj.pop(key, None)
        return obj

    record = json.loads(text, object_pairs_hook=slim)
    if not isinstance(record, dict) or SEAL_KEY not in record:
        return record, SealState.unsealed
    said = record[SEAL_KEY]
    if _quick_digest(text, set(record)) == said:
        return record, SealState.sealed
    try:  # another layout, or changed: the whole record, written out canonically
        whole = json.loads(text, object_pairs_hook=hook)
        return record, SealState.sealed if seal_of(whole) == said else SealState.changed
    except ValueError:  # NaN or infinity: felab writes null, so this was edited
        return record, SealState.changed
