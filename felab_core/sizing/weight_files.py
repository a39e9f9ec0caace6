"""Which files in a download hold the model's one copy of its weights, and whether all are there.

A Hugging Face folder may hold two copies (Mistral ships `consolidated.safetensors` beside the
`model-0000N-of-0000M` shards), a partial download (1 of 4 shards), or Git LFS pointers that
`git clone` without git-lfs leaves in place of the weights; a GGUF may be split by llama.cpp's
gguf-split into `*-00001-of-00003.gguf` shards. Each had been priced from the files at hand: twice
the weights, a quarter of them, a pointer's text as a header, or one shard of three.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from felab_core.files import MiB, NamedFileError, read_named_text
from felab_core.sizing.errors import SizingError
from felab_core.text import with_hidden_shown

INDEX_NAME = "model.safetensors.index.json"
#: The shard names transformers and llama.cpp's gguf-split write.
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.(?P<ext>safetensors|gguf)$")
#: The first line of a Git LFS pointer file.
LFS_POINTER = b"version https://git-lfs"
_MOST_SHOWN = 4


@dataclass(frozen=True)
class SafetensorsFiles:
    """The files that hold the weights, and a note on any left out (empty when none were)."""

    files: tuple[Path, ...]
    note: str = ""
    #: Why the weights cannot be read from these files (Git LFS pointers), when that is so.
    unreadable: str = ""


def _shown(names: list[str]) -> str:
    listed = ", ".join(with_hidden_shown(n) for n in names[:_MOST_SHOWN])
    more = len(names) - _MOST_SHOWN
    return listed + (f" and {more:,} more" if more > 0 else "")


def _missing(folder: Path, names: list[str], said: str) -> None:
    """Refuse when some of the files `said` (a phrase ending in their count) are not there."""
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise SizingError(
            f"{with_hidden_shown(str(folder))}: {said}, and "
            f"{len(missing):,} of them {'is' if len(missing) == 1 else 'are'} missing "
            f"({_shown(missing)}): the download is incomplete; finish it (huggingface-cli "
            "download resumes where it stopped), or give the model's size with --model-bytes"
        )


def _index_names(index: Path) -> list[str]:
    """The shard files model.safetensors.index.json's weight_map names, in order."""
    try:
        text = read_named_text(index, what="safetensors index", limit=64 * MiB)
        data = json.loads(text)
    except NamedFileError as exc:
        raise SizingError(str(exc)) from None
    except (ValueError, RecursionError):
        data = None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    names = (
        sorted({v for v in weight_map.values() if isinstance(v, str)})
        if isinstance(weight_map, dict)
        else []
    )
    if not names or any("/" in n or "\\" in n or n in ("", ".", "..") for n in names):
        raise SizingError(
            f"{with_hidden_shown(str(index))} is not a safetensors index (a JSON object whose "
            "weight_map names the shard files beside it): download it again, or delete it so "
            "felab reads the .safetensors files themselves"
        )
    return names


def _pointers(files: list[Path]) -> list[Path]:
    found = []
    for path in files:
        if not path.is_file():  # a FIFO would be waited on for good: the header reader refuses it
            continue
        try:
            with path.open("rb") as fh:
                if fh.read(len(LFS_POINTER)) == LFS_POINTER:
                    found.append(path)
        except OSError:
            continue  # the header reader says why
    return found


def safetensors_files(folder: Path) -> SafetensorsFiles:
    """The .safetensors files that hold one copy of the weights, refusing a partial download."""
    present = sorted(folder.glob("*.safetensors"))
    if not present:
        return SafetensorsFiles(())
    index = folder / INDEX_NAME
    note = ""
    if index.is_file():
        names = _index_names(index)
        files = [folder / n for n in names]
        _shards_all_here(folder, files)  # 1 of 4 here, the index naming 2: say all 3
        _missing(folder, names, f"{INDEX_NAME} names {len(names):,} shard files")
        _index_names_its_whole_set(folder, names)
        left = [p.name for p in present if p.name not in names]
        shards = [n for n in left if _SHARD.match(n)]
        copies = [n for n in left if n not in shards]
        notes = []
        if copies:
            notes.append(
                f"{_shown(copies)} {'is' if len(copies) == 1 else 'are'} left out: {INDEX_NAME} "
                "names the files that hold the weights (Mistral's downloads hold a second "
                "copy in consolidated.safetensors)"
            )
        if shards:  # another set's shards: not "a second copy" without a look
            notes.append(
                f"{_shown(shards)} {'is a shard' if len(shards) == 1 else 'are shards'} of "
                f"another set that {INDEX_NAME} does not name, left out: the index names the "
                "files that hold the weights; delete the other set if it is not this model's"
            )
        note = "; ".join(notes)
    else:
        files = present
        consolidated = [p for p in present if p.name.startswith("consolidated")]
        if consolidated and len(consolidated) < len(present):
            files = [p for p in present if p not in consolidated]
            note = (
                f"{_shown([p.name for p in consolidated])} "
                f"{'is' if len(consolidated) == 1 else 'are'} left out: "
                "the folder also holds the Hugging Face files, a second copy of the same weights"
            )
        _shards_all_here(folder, files)
    pointers = _pointers(files)
    unreadable = ""
    if pointers:
        unreadable = (
            f"{_shown([p.name for p in pointers])} in {with_hidden_shown(str(folder))} "
            f"{'is a Git LFS pointer' if len(pointers) == 1 else 'are Git LFS pointers'}, not "
            "the weights (git clone without git-lfs leaves these): run `git lfs pull` in the "
            "folder, or give the model's size with --model-bytes"
        )
    return SafetensorsFiles(tuple(files), note, unreadable)


def _index_names_its_whole_set(folder: Path, names: list[str]) -> None:
    """Refuse an index that names `model-00001-of-00002` but not `model-00002-of-00002`
    beside it: the shard names say the set is one model's, so the file the index leaves out
    is the model's own half (it had been left out as Mistral's "second copy")."""
    for name in names:
        hit = _SHARD.match(name)
        if hit is None or hit["ext"] != "safetensors":
            continue
        count = int(hit["count"])
        whole = [f"{hit['stem']}-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]
        unnamed = [n for n in whole if n not in names and (folder / n).exists()]
        if unnamed:
            named = sum(n in names for n in whole)
            raise SizingError(
                f"{with_hidden_shown(str(folder))}: {INDEX_NAME} names {named:,} of the "
                f"{count:,} shards {with_hidden_shown(hit['stem'])}-…-of-{count:05d}, but "
                f"{_shown(unnamed)} of that set {'is' if len(unnamed) == 1 else 'are'} here too: "
                "the index is not this download's (or was cut short); download the index "
                "again, or delete it so felab reads the .safetensors files themselves"
            )


def _shards_all_here(folder: Path, files: list[Path]) -> None:
    """Refuse when `model-00001-of-00004.safetensors` is here without shards 2 to 4."""
    sets = set()
    for path in files:
        hit = _SHARD.match(path.name)
        if hit is not None and hit["ext"] == "safetensors" and int(hit["count"]) > 1:
            sets.add((hit["stem"], int(hit["count"])))
    for stem, count in sorted(sets):
        names = [f"{stem}-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]
        _missing(folder, names, f"the shard names say the weights fill {count:,} files")


def gguf_shards(path: Path, count: int | None = None) -> list[Path]:
    """All shards of a split GGUF given its first (`*-00001-of-00003.gguf`); [path] for a
    whole file. `count` is the file's own split.count when read; a shard missing is refused."""
    hit = _SHARD.match(path.name)
    named = int(hit["count"]) if hit is not None and hit["ext"] == "gguf" else 1
    total = count if count is not None else named
    if total <= 1:
        return [path]
    shown = with_hidden_shown(str(path))
    if hit is None or hit["ext"] != "gguf" or named != total:
        raise SizingError(
            f"{shown} is shard 1 of a GGUF split into {total:,} files (split.count), but its "
            "name is not gguf-split's (NAME-00001-of-0000N.gguf), so the other shards cannot be "
            "found: give the shards their names back, or the whole model's size with --model-bytes"
        )
    if int(hit["no"]) != 1:
        first = f"{hit['stem']}-00001-of-{total:05d}.gguf"
        raise SizingError(
            f"{shown} is shard {int(hit['no']):,} of a GGUF split into {total:,} files: give the "
            f"first shard, {with_hidden_shown(first)}, and felab reads the rest beside it"
        )
    names = [f"{hit['stem']}-{i:05d}-of-{total:05d}.gguf" for i in range(1, total + 1)]
    _missing(path.parent, names, f"the GGUF is split into {total:,} shards")
    return [path.parent / n for n in names]


def refuse_unsplit_shard_name(path: Path, count: Any) -> None:
    """A GGUF named `NAME-00001-of-00002.gguf` whose metadata gives no split.count (or 1): the
    name's count and the metadata's are two readings of one figure; shard 2 beside it had been
    left out without a word, half the model priced."""
    hit = _SHARD.match(path.name)
    if hit is None or hit["ext"] != "gguf" or int(hit["count"]) <= 1:
        return
    named = int(hit["count"])
    said = "no split.count" if count is None else f"split.count {with_hidden_shown(repr(count))}"
    raise SizingError(
        f"{with_hidden_shown(str(path))}: its name says shard {int(hit['no']):,} of {named:,}, "
        f"but its metadata gives {said} (a whole model's); give the first shard gguf-split "
        "wrote (it carries split.count), or rename a whole model's file so its name does not "
        "read as one shard of several"
    )
