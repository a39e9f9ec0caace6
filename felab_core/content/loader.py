"""Reading and checking content files, with errors that name the file, the line and the field.

`check_dir` reads every pack in a folder and reports every problem it finds at once (an author
fixes them in one pass); nothing here touches the database. `felab_core.content.store` loads
only a folder that checks clean, so a broken pack never half-loads.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from felab_core.content.format import FORMAT, ID_PATTERN, Pack
from felab_core.content.yaml_numbers import number_surprise, yaml_number_form
from felab_core.files import NamedFileError, broken_link, read_named_bytes
from felab_core.text import holds_hidden, with_hidden_shown

PACK_SUFFIXES = (".yaml", ".yml")
#: The longest text one field may hold: the course's longest is under 1,000 characters; a
#: 100,000-character label checked clean and then filled a terminal with 1.6 MB.
MAX_FIELD_CHARS = 10_000


@dataclass(frozen=True)
class ContentProblem:
    """One thing wrong in a content file: where, which field, and what was expected."""

    path: Path
    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        path = with_hidden_shown(str(self.path))  # a folder named with an escape code
        where = f"{path}:{self.line}" if self.line else path
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class ContentError(ValueError):
    """A content folder that does not check clean; `problems` lists every fault found."""

    def __init__(
        self, problems: list[ContentProblem], skipped: list[ContentProblem] | None = None
    ) -> None:
        self.problems = problems
        self.skipped = skipped or []  # near misses not read (CheckReport.skipped)
        count = f"{len(problems)} problem{'' if len(problems) == 1 else 's'}"
        head = f"{count} in the content; nothing was loaded:"
        super().__init__("\n".join([head, *(f"  {p}" for p in problems)]))


@dataclass(frozen=True)
class ParsedPack:
    path: Path
    pack: Pack
    checksum: str


@dataclass
class CheckReport:
    packs: list[ParsedPack] = field(default_factory=list)
    problems: list[ContentProblem] = field(default_factory=list)
    #: Files named almost like a pack (day-10.yaml.bak, day-10.json), not read: said, not refused.
    skipped: list[ContentProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# ----------------------------------------------------------------------------- YAML positions


class _Positions:
    """Line numbers for the fields of a YAML document, found by walking its node tree."""

    def __init__(self, root: yaml.Node | None) -> None:
        self.root = root

    def line(self, loc: tuple[str | int, ...]) -> int | None:
        node = self.root
        if node is None:
            return None
        found = node.start_mark.line + 1
        for part in loc:
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode) and key.value == part:
                        child = value
                        break
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(part, int)
                and 0 <= part < len(node.value)
            ):
                child = node.value[part]
            if child is None:
                break
            node = child
            found = node.start_mark.line + 1
        return found

    def _keys(self) -> Iterator[list[yaml.ScalarNode]]:
        """Each mapping's scalar keys, in order, over the whole tree."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.MappingNode):
                yield [key for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
                stack.extend(value for _, value in node.value)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)

    def duplicate_keys(self) -> list[tuple[str, int]]:
        """Keys written twice in one mapping: YAML keeps the last silently, felab refuses."""
        out: list[tuple[str, int]] = []
        for keys in self._keys():
            seen: set[str] = set()
            for key in keys:
                if key.value in seen:
                    out.append((key.value, key.start_mark.line + 1))
                seen.add(key.value)
        return out

    def merge_keys(self) -> list[int]:
        """Lines of YAML merge keys (`<<: {...}`): they fold in fields the duplicate check
        cannot see (`<<: {minutes: 20}` beside `minutes: 10` had checked clean)."""
        return [
            key.start_mark.line + 1
            for keys in self._keys()
            for key in keys
            if key.tag == "tag:yaml.org,2002:merge"
        ]


def field_path(loc: tuple[str | int, ...]) -> str:
    """('cards', 1, 'engineer', 'answer') -> 'cards[1].engineer.answer'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


#: A sample value for each number field, for the advice given when a field holds true/false.
_SAMPLE_NUMBERS = {"day": "3", "minutes": "10", "seconds": "20", "example": "44.6"}


def _expected(err: dict[str, Any]) -> str:
    """Pydantic's message, reworded where an author needs to know what to write instead."""
    kind = err["type"]
    given = err.get("input")
    shown = repr(given) if not isinstance(given, dict | list) else type(given).__name__
    if len(shown) > 60:
        shown = shown[:57] + "..."
    loc = err["loc"]
    if kind == "missing":
        return "missing: this field is required"
    if kind == "extra_forbidden":
        return "unknown field: check the spelling against content/README.md"
    if kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == ID_PATTERN:
        return (
            f"expected an id of 2-100 lower-case letters, digits, '.', '-' or '_' "
            f"(such as d02.card.slot-trap), got {shown}"
        )
    if kind == "string_too_short":
        return "expected some text, got an empty value"
    if kind == "literal_error" and loc and loc[-1] == "format":
        return f"expected format: {FORMAT} (the first line of every pack), got {shown}"
    if kind == "literal_error":
        return f"expected one of {err['ctx']['expected']}, got {shown}"
    if kind == "value_error":  # our own validators say the whole of it
        return str(err["ctx"]["error"])
    if kind == "too_short":
        return "expected at least one entry, got none"
    if kind == "string_type" and isinstance(given, date | bool | int | float):
        # YAML reads an unquoted 2026-01-05, yes/no/on/off or 12 as a date, a truth or a number
        if isinstance(given, bool):
            got = f"{str(given).lower()} (YAML reads an unquoted yes/no/on/off as true/false)"
        else:
            kind_of = "a date" if isinstance(given, date) else "a number"
            got = f"{kind_of} ({given})"
        return f"expected text, got {got}: put the value in quotes to keep it as text"
    if kind in ("int_type", "float_type") and isinstance(given, bool):
        # Python's bool is an int: a lax field had stored `minutes: yes` as 1 minute
        key = str(loc[-1]) if loc else "day"
        return (
            f"expected a number, got {str(given).lower()} (YAML reads an unquoted "
            f"yes/no/on/off as true/false): give the number, e.g. {key}: "
            f"{_SAMPLE_NUMBERS.get(key, '3')}"
        )
    text = given.strip() if isinstance(given, str) else ""
    if kind == "int_type" and re.fullmatch(r"[0-9]+", text):
        return f"expected a whole number, got the text {shown}: remove the quotes"
    as_number = yaml_number_form(text) if text else None
    if kind in ("float_type", "float_parsing") and as_number and as_number == text:
        return f"expected a number, got the text {shown}: remove the quotes"
    if kind in ("float_type", "float_parsing") and as_number is not None:
        return (
            f"expected a number, got the text {shown}: the pack's YAML (1.1) reads an exponent "
            f"as a number only with a dot and a sign, so write {as_number} (or the number "
            "without an exponent)"
        )
    if kind in ("model_type", "dict_type"):
        return f"expected a mapping of fields (key: value lines), got {shown}"
    if kind == "list_type":
        return f"expected a list (lines starting with '- '), got {shown}"
    return f"{err['msg']}, got {shown}"


def _cross_checks(pack: Pack) -> list[tuple[tuple[str | int, ...], str]]:
    """Checks across items: ids unique in the file, and `step:` naming a step of this day."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    steps = {s.id for s in pack.steps}
    first: dict[str, str] = {pack.id: "id"}
    for section, i, item_id, step in pack.all_items():
        where = f"{section}[{i}]"
        if item_id in first:
            out.append(
                (
                    (section, i, "id"),
                    f"{item_id!r} is already the id of {first[item_id]}; every id must be unique",
                )
            )
        else:
            first[item_id] = where
        if step is not None and step not in steps:
            known = ", ".join(sorted(steps)) or "none: add a steps: list"
            out.append(
                ((section, i, "step"), f"{step!r} is not a step of this day (steps: {known})")
            )
    return out


#: A pack is a day of course text (the largest is ~20 kB): past these it is not one, and a
#: YAML "billion laughs" (aliases of aliases) would take minutes to walk. Refused, said so.
MAX_PACK_BYTES = 2_000_000
MAX_ALIASES = 100
MAX_DEPTH = 40
MAX_EXPANDED_NODES = 100_000


def _shape_problem(text: str) -> tuple[str, int | None] | None:
    """Aliases, nesting and the size the document would have with every alias written out,
    counted from the parser's events before any tree is built."""
    aliases = 0
    anchors: dict[str, int] = {}
    stack: list[tuple[str | None, int]] = [(None, 0)]  # (anchor, expanded nodes so far)
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 if event.start_mark else None
        tag = getattr(event, "tag", None)
        if tag is not None:  # !!bool abc, !!timestamp x: constructors that fail in Python
            return (
                f"holds a YAML tag ({tag.replace('tag:yaml.org,2002:', '!!')[:40]}): a pack writes "
                "plain values; remove the tag (quote the text if it must stay as written)",
                line,
            )
        if isinstance(event, yaml.AliasEvent) and any(
            open_anchor == event.anchor for open_anchor, _ in stack
        ):  # &a [*a]: a value inside itself, which no walk of it ends
            return (
                f"the alias *{event.anchor} refers to a value that holds it (recursive YAML)",
                line,
            )
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                return (
                    f"more than {MAX_ALIASES} aliases (*name): felab refuses YAML that repeats "
                    "itself by reference; write the text out",
                    line,
                )
            anchor, size = stack[-1]
            stack[-1] = (anchor, size + anchors.get(event.anchor or "", 1))
        elif isinstance(event, yaml.ScalarEvent):
            surprise = number_surprise(event)
            if surprise is not None:
                return surprise, line
            anchor, size = stack[-1]
            stack[-1] = (anchor, size + 1)
            if event.anchor:
                anchors[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            stack.append((event.anchor, 1))
            if len(stack) > MAX_DEPTH:
                return f"nested more than {MAX_DEPTH} levels deep", line
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor:
                anchors[anchor] = size
            outer, total = stack[-1]
            stack[-1] = (outer, total + size)
        if stack[-1][1] > MAX_EXPANDED_NODES and not aliases:  # written out, not repeated
            return (
                f"holds more than {MAX_EXPANDED_NODES:,} values: a pack is one day of course "
                "text (a day holds a few hundred); split it, or check it is the right file",
                line,
            )
        if stack[-1][1] > MAX_EXPANDED_NODES:
            return (
                f"its aliases (*name) expand to more than {MAX_EXPANDED_NODES:,} values: felab "
                "refuses YAML that repeats itself by reference; write the text out",
                line,
            )
    return None


def parse_pack(path: Path) -> tuple[ParsedPack | None, list[ContentProblem]]:
    """Read and check one file: the pack when it is sound, else every problem found."""
    try:  # the bytes as they are: the pack's hash is of the file
        raw = read_named_bytes(path, what="pack (one day of course text)", limit=MAX_PACK_BYTES)
    except NamedFileError as exc:
        return None, [ContentProblem(path, "", exc.reason)]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [ContentProblem(path, "", f"not UTF-8 text (byte {exc.start}); save as UTF-8")]
    try:
        shape = _shape_problem(text)
        if shape is not None:
            return None, [ContentProblem(path, "", f"not accepted: {shape[0]}", shape[1])]
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        return None, [ContentProblem(path, "", f"not valid YAML: {problem}", line)]
    except ValueError:  # an integer of thousands of digits (Python reads at most 4,300)
        return None, [ContentProblem(path, "", "holds a number of thousands of digits: not a pack")]
    pos = _Positions(root)
    problems = [
        ContentProblem(path, key, "written twice in the same block; keep one", line)
        for key, line in pos.duplicate_keys()
    ]
    problems += [
        ContentProblem(path, "<<", "a YAML merge key: write the fields out in the block", line)
        for line in pos.merge_keys()
    ]
    if not isinstance(data, dict):
        problems.append(
            ContentProblem(path, "", "expected a mapping of fields starting with `format:`", 1)
        )
        return None, problems
    for where, text in _strings(data):
        if len(text) > MAX_FIELD_CHARS:
            problems.append(
                ContentProblem(
                    path,
                    where,
                    f"is {len(text):,} characters: a pack's text is at most "
                    f"{MAX_FIELD_CHARS:,} a field (a card is read in a minute); split it",
                )
            )
            continue
        if holds_hidden(text, allowed="\n\t"):
            # An escape code (or a U+202E) in a title would reach every member's terminal and
            # chat post.
            problems.append(
                ContentProblem(
                    path, where, "holds invisible or control characters: write plain text"
                )
            )
    if problems:
        return None, problems
    try:
        pack = Pack.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            problems.append(
                ContentProblem(path, field_path(loc), _expected(dict(err)), pos.line(loc))
            )
        return None, problems
    for loc, message in _cross_checks(pack):
        problems.append(ContentProblem(path, field_path(loc), message, pos.line(loc)))
    named = re.fullmatch(r"day-0*(\d+)\.ya?ml", path.name, re.IGNORECASE)
    if named and int(named.group(1)) != pack.day:
        problems.append(
            ContentProblem(
                path, "day", f"the file is named for day {named.group(1)} but says day {pack.day}"
            )
        )
    if problems:
        return None, problems
    return ParsedPack(path, pack, hashlib.sha256(raw).hexdigest()), []


def _strings(value: object, where: str = "") -> list[tuple[str, str]]:
    """Every text in a parsed pack, with where it sits (title, cards.2.front ...)."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [
            found
            for k, v in value.items()
            for found in _strings(v, f"{where}.{k}" if where else str(k))
        ]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _strings(v, f"{where}.{i}")]
    return []


def pack_files(folder: Path) -> list[Path]:
    """Every entry named like a pack: one that is a folder, a pipe or a device is then refused
    by name, not passed over (a folder named day-02.yaml read as "no packs here"). The suffix
    in any case: Day-10.YAML, saved so by some editors, had been passed over without a word."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in PACK_SUFFIXES)


def near_misses(folder: Path) -> list[ContentProblem]:
    """Files not read as packs whose names look meant as one (day-10.yaml.bak, day-10.json,
    day-10.yaml.txt): each named, so a pack is not left out unseen. Hidden files (an editor's
    .day-10.yaml.swp) and others (README.md, notes.txt) are passed over."""
    return [
        ContentProblem(
            p,
            "",
            "not read: a pack's name ends in .yaml or .yml; rename it to load it, or move it "
            "out of the folder",
        )
        for p in sorted(folder.iterdir())
        if not p.name.startswith(".")
        and p.suffix.lower() not in PACK_SUFFIXES
        and (p.name.lower().startswith("day") or re.search(r"\.ya?ml", p.name, re.IGNORECASE))
    ]


def check_dir(folder: Path) -> CheckReport:
    """Check every pack in a folder, and the rules between packs (one pack per day, ids unique)."""
    report = CheckReport()
    if not folder.is_dir():
        link = broken_link(folder)
        what = "not a folder" if folder.exists() else "does not exist"
        report.problems.append(
            ContentProblem(
                folder, "", link or f"{what}: give the folder that holds the day-NN.yaml packs"
            )
        )
        return report
    files = pack_files(folder)
    report.skipped = near_misses(folder)
    if not files:
        report.problems.append(
            ContentProblem(folder, "", "no .yaml packs here; see content/README.md for the format")
        )
    for path in files:
        parsed, problems = parse_pack(path)
        report.problems.extend(problems)
        if parsed is not None:
            report.packs.append(parsed)
    days: dict[int, ParsedPack] = {}
    owners: dict[str, Path] = {}
    for parsed in report.packs:
        pack = parsed.pack
        other = days.get(pack.day)
        if other is not None:
            report.problems.append(
                ContentProblem(
                    parsed.path,
                    "day",
                    f"day {pack.day} is also the day of {other.path.name}; one pack per day",
                )
            )
        days.setdefault(pack.day, parsed)
        for section, i, item_id, _ in [("pack", 0, pack.id, None), *pack.all_items()]:
            where = "id" if section == "pack" else f"{section}[{i}].id"
            owner = owners.get(item_id)
            if owner is not None and owner != parsed.path:
                report.problems.append(
                    ContentProblem(
                        parsed.path, where, f"{item_id!r} is already used in {owner.name}"
                    )
                )
            owners.setdefault(item_id, parsed.path)
    return report
