"""Where a run's figures go: one CSV row per run (the course's results/01-latency.csv) and the
whole record as JSON (`felab.bench/1`).

The CSV's columns are a published contract: later days (the sizing memo, leaderboards) read
them, so columns are only ever appended, never renamed or reordered.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import os
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from felab_core import __version__
from felab_core.engine.measure import RunResult, TargetResult
from felab_core.engine.metrics import RunSummary, Stats
from felab_core.engine.record_seal import sealed_text
from felab_core.files import (
    BENCH_RECORD,
    RESULTS_CSV,
    NamedFileError,
    blocking_file,
    make_folder_for,
    refuse_overwrite,
)
from felab_core.settings import get_settings

DEFAULT_CSV_NAME = "01-latency.csv"
DEFAULT_CSV = Path("results") / DEFAULT_CSV_NAME


def default_csv() -> Path:
    """The course's results file, in FELAB_RESULTS_DIR (results/ unless set)."""
    return get_settings().results_dir / DEFAULT_CSV_NAME


CSV_COLUMNS: tuple[str, ...] = (
    "timestamp",
    "host",
    "target",
    "server",
    "server_version",
    "model",
    "api",
    "preset",
    "concurrency",
    "rate",
    "burstiness",
    "requests",
    "ok",
    "failed",
    "prompt_tokens",
    "prompt_tokens_server",
    "shared_prefix_tokens",
    "max_tokens",
    "warmup",
    "seed",
    "ttft_p50_s",
    "ttft_p95_s",
    "tpot_p50_s",
    "tpot_p95_s",
    "itl_p50_s",
    "itl_p95_s",
    "writing_tps_p50",
    "e2e_p50_s",
    "e2e_p95_s",
    "output_tps",
    "request_tps",
    "goodput_rps",
    "token_source",
    "server_tps_p50",
    "cold_starts",
    "felab_version",
)
#: What a job's row may carry besides the file's columns (a chat run's cache share and TTFT
#: turn by turn, felab_core/jobs/run.py): the ingest keeps these and the columns, no other key.
JOB_ROW_EXTRAS = ("cached_share", "ttft_p50_by_turn_ms")
#: The most columns a results CSV may have: felab's own, the older ones it still reads, and
#: room for a spreadsheet's notes; past it the file is something else (100,000 extra columns
#: took minutes to read, each row a dict of them all).
MAX_CSV_COLUMNS = 256
#: The largest results CSV felab reads: felab bench writes a few hundred bytes a run, so this
#: is well over 100,000 runs. A 220 MB file read for 15 s in silence (2.1 million rows, gigabytes of
#: memory) before its import could even start.
MAX_RESULTS_BYTES = 64 * 1024 * 1024


class ResultsFileError(Exception):
    """The results file cannot take this row (it has other columns, or cannot be written)."""


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return ""
    return f"{x:.6g}"


def _p(stats: Stats | None, which: str) -> str:
    return "" if stats is None else _num(getattr(stats, which))


def short_model(name: str | None) -> str:
    """A model path as a reader wants it: its file or folder name, not the whole path."""
    if not name:
        return "(server default)"
    if "/" not in name or not name.startswith(("/", "~", ".")):
        return name  # an id such as llama3.1:8b or org/model
    parts = [p for p in name.split("/") if p]
    tail = parts[-2:] if parts[-1] in ("hf", "model", "snapshots") else parts[-1:]
    return "/".join(tail)


def summary_columns(s: RunSummary) -> dict[str, str]:
    """The columns a run's figures fill: what a merge of slices computes again."""
    return {
        "requests": str(s.ok + s.failed),
        "ok": str(s.ok),
        "failed": str(s.failed),
        "prompt_tokens_server": _num(s.prompt_tokens_mean),
        "ttft_p50_s": _p(s.ttft_s, "p50"),
        "ttft_p95_s": _p(s.ttft_s, "p95"),
        "tpot_p50_s": _p(s.tpot_s, "p50"),
        "tpot_p95_s": _p(s.tpot_s, "p95"),
        "itl_p50_s": _p(s.itl_s, "p50"),
        "itl_p95_s": _p(s.itl_s, "p95"),
        "writing_tps_p50": _p(s.writing_tps, "p50"),
        "e2e_p50_s": _p(s.e2e_s, "p50"),
        "e2e_p95_s": _p(s.e2e_s, "p95"),
        "output_tps": _num(s.output_tps),
        "request_tps": _num(s.request_tps),
        "goodput_rps": _num(s.goodput_rps),
        "token_source": s.token_source or "",
        "server_tps_p50": _p(s.server_tps, "p50"),
        "cold_starts": str(len(s.cold_starts)),
    }


def csv_row(result: TargetResult, run: RunResult) -> dict[str, str]:
    s = run.summary
    w = result.workload
    ident = result.identity
    server = ident.kind.value if ident and ident.kind else result.target.kind.value
    return {
        "timestamp": result.started_at,
        "host": result.host,
        "target": result.target.name,
        "server": server,
        "server_version": (ident.version or "") if ident else "",
        "model": result.model or "",
        "api": result.target.api.value,
        "preset": w.preset or "",
        "concurrency": str(run.concurrency),
        "rate": _num(run.rate),
        "burstiness": _num(w.burstiness) if run.rate is not None else "",
        "prompt_tokens": "" if w.prompt_tokens is None else str(w.prompt_tokens),
        "shared_prefix_tokens": str(w.shared_prefix_tokens),
        "max_tokens": "" if w.max_tokens is None else str(w.max_tokens),
        "warmup": str(w.warmup),
        "seed": str(w.seed),
        **summary_columns(s),
        "felab_version": __version__,
    }


def check_destinations(
    csv_path: Path | None,
    json_path: Path | None,
    *,
    inputs: Sequence[tuple[Path | None, str]] = (),
    what: str = "results",
    json_writes: str | None = BENCH_RECORD,
    replaces_others: bool = False,
) -> None:
    """Refuse, before a run, files the run could not be saved to: a results CSV with other
    columns, a folder that is a file, another kind of felab's files (the database, the CSV
    under a JSON record), a file the run reads (`inputs`, each with its role) or the other
    output. Minutes of timing are not lost at the end. `json_writes`: the kind the second
    path gets (a memo and a backup use it too); it replaces no other file that is not empty
    unless `replaces_others` (the CSV is appended to: its header is checked instead)."""
    outputs = ((csv_path, "results CSV (--csv)"), (json_path, "JSON record (--json)"))
    for path, _ in outputs:
        if path is None:
            continue
        others = [o for o in outputs if o[0] is not path]
        writes = RESULTS_CSV if path is csv_path else json_writes
        try:  # a device or a pipe: files written beside it would land in /dev
            refuse_overwrite(
                path,
                what=what,
                inputs=[*inputs, *others],
                writes=writes,
                replaces_others=replaces_others or path is csv_path,
            )
        except NamedFileError as exc:
            raise ResultsFileError(f"cannot write there: {exc}") from None
        folder = path.parent
        if (blocker := blocking_file(folder)) is not None:
            raise ResultsFileError(
                f"cannot write {path}: {blocker} is a file, not a folder; choose another path"
            )
        if not folder.exists() and not folder.parent.exists() and not folder.parent.is_symlink():
            raise ResultsFileError(  # as make_folder_for: one missing folder is made, no tree
                f"cannot write {path}: {folder.parent} does not exist, so felab will not make "
                f"the {what} there: check the path, or make the folder first (mkdir -p)"
            )
        for above in (folder, *folder.parents):
            if above.exists():
                try:  # a real try (root passes every access() check, /proc takes no file)
                    tempfile.TemporaryFile(dir=above).close()
                except OSError as exc:
                    raise ResultsFileError(
                        f"cannot write in {above} ({exc.strerror}); choose another path"
                    ) from None
                break
        if path.is_file() and not os.access(path, os.W_OK):
            raise ResultsFileError(f"cannot write {path}: it is read-only; choose another path")
    if csv_path is not None and _check_header(csv_path):
        _needs_line_end(csv_path)  # a cut last row: refused before the run, not after it


def other_separator(header: list[str]) -> str:
    """The words for a header split by `;` or a tab, not `,` (a spreadsheet set to a language
    with decimal commas saves CSV with `;`): the file was read as one column, and "has no
    server column" or "37 cells where the header has 1" did not say why. A header of several
    columns with `;` or a tab inside one (`timestamp;host;target,model,...`) blamed its first
    sound row ("36 cells where the header has 34"): that cell is named. '' for neither."""
    if len(header) > 1:
        for cell in header:
            for mark, name in ((";", "`;`"), ("\t", "a tab")):
                if mark in cell:
                    shown = cell if len(cell) <= 40 else cell[:40] + "..."
                    return (
                        f"has a header cell {shown!r} holding {name} among `,`-separated "
                        "names: the header mixes delimiters, so felab misreads its columns; "
                        "save the file with one delimiter, commas (in a spreadsheet: CSV with "
                        "`,` as the field delimiter)"
                    )
        return ""
    if not header:
        return ""
    for mark, name in ((";", "`;`"), ("\t", "tab")):
        if mark in header[0]:
            return (
                f"looks {name}-separated (its header line has {name} and no `,`): felab reads "
                "comma-separated CSV; save it with commas (in a spreadsheet: CSV with `,` as "
                "the field delimiter)"
            )
    return ""


def _check_header(path: Path) -> bool:
    """True when `path` already holds felab's header; ResultsFileError for other columns."""
    if not (path.exists() and path.stat().st_size > 0):
        return False
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), [])
    except (UnicodeDecodeError, csv.Error):
        header = []
    if tuple(header) != CSV_COLUMNS[: len(header)] or not header:
        other = other_separator(header)
        raise ResultsFileError(
            f"{path} {other}, or move it aside or pass --csv with a new file"
            if other
            else f"{path} has other columns than this felab writes; move it aside or pass "
            "--csv with a new file"
        )
    if len(header) < len(CSV_COLUMNS):
        raise ResultsFileError(
            f"{path} was written by an older felab with fewer columns; move it aside or "
            "pass --csv with a new file"
        )
    return True


def _needs_line_end(path: Path) -> bool:
    """True when the file's last row is whole but has no line end (an editor saved it so): the
    next row must not be glued onto it. ResultsFileError when that last row is cut short (a
    copy stopped mid-row, with its line end or without): a row appended there would be read
    as part of it, or sit below a row the next reader trips on."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return False
            fh.seek(size - 1)
            ended = fh.read(1) in (b"\n", b"\r")
        with path.open(newline="", encoding="utf-8-sig", errors="replace") as fh:
            reader = csv.reader(fh)
            width = len(next(reader, []))  # an older felab's header may be shorter
            cells, line = width, 1
            for row in reader:  # a quoted cell may hold a line end: rows, not lines
                if row:  # a blank line is no row
                    cells, line = len(row), reader.line_num
    except OSError:
        return False  # the write itself will say why
    except csv.Error as exc:  # a cell over csv's size limit, say
        raise ResultsFileError(
            f"{path}: not readable as CSV ({exc}): fix or move the file, or give another with --csv"
        ) from None
    if cells != width:
        raise ResultsFileError(
            f"{path}: its last line is cut short (line {line}: {cells} cells where its header "
            f"has {width}), as if a copy stopped mid-row: fix or move the file, or give another "
            "with --csv"
        )
    return not ended


def append_csv(path: Path, rows: list[dict[str, str]]) -> None:
    """Append rows, writing the header to a new file; refuse a file with other columns, or
    whose last row was cut short; end a last row that has no line end first."""
    make_folder_for(path, what="results CSV")
    exists = _check_header(path)
    mend = exists and _needs_line_end(path)
    with path.open("a", newline="", encoding="utf-8") as fh:
        if mend:
            fh.write("\r\n")
        # a job's row may carry chat-only keys (cached_share, ttft by turn): not file columns
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        if not exists:
            writer.writeheader()
        writer.writerows(rows)


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a results file felab wrote itself (no checks: see read_table for others')."""
    return read_table(path)[1]


class UnreadableResults(ValueError):
    """A results CSV that cannot be read as one, in words that follow its path: "is not UTF-8
    text (byte N)" or "line N: ...". Each command adds its own advice after it."""

    def __init__(self, text: str, *, not_utf8: bool = False) -> None:
        super().__init__(text)
        self.not_utf8 = not_utf8


def _refuse_json(text: str) -> None:
    """A JSON file is no CSV: the bench record (`--json`) given for the results file was read as
    a header of `{` and blamed "line 2: 2 cells where the header has 1" (sweep 23 s2 M2)."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return
    kind = "a felab bench record" if '"felab.bench/' in text[:256] else "JSON"
    raise UnreadableResults(
        f"is {kind}, not the results CSV: felab bench writes its rows to {DEFAULT_CSV_NAME} "
        "(in FELAB_RESULTS_DIR, results/ unless set, or the --csv it was given); give that file"
    )


def read_table(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a results CSV from anywhere (read_table_lines, without lines)."""
    columns, rows, _ = read_table_lines(path)
    return columns, rows


def read_table_lines(path: Path) -> tuple[list[str], list[dict[str, str]], list[int]]:
    """The header and rows of a results CSV from anywhere (a spreadsheet, an old felab, a hand),
    and the line each row ends on (blank lines are skipped, and a spreadsheet leaves some:
    the row after them is not on line index + 2, A2-19).

    A spreadsheet's byte-order mark is not a column; the first byte that is not UTF-8 is counted
    from the start of the file; what the csv module refuses (a cell past its size limit, say) and
    a row with more or fewer cells than the header are said with their line. Raises OSError when
    the file cannot be read, UnreadableResults for the rest.
    """
    with path.open("rb") as fh:
        data = fh.read(MAX_RESULTS_BYTES + 1)
    if len(data) > MAX_RESULTS_BYTES:
        raise UnreadableResults(
            f"is over {MAX_RESULTS_BYTES // (1024 * 1024)} MiB: felab bench writes a few "
            "hundred bytes a run, so this is well over 100,000 runs or not a results CSV; split "
            "it into files of at most that, or check it is the right file"
        )
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableResults(
            f"is not UTF-8 text (byte {skip + exc.start})", not_utf8=True
        ) from None
    _refuse_json(text)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        columns = list(reader.fieldnames or [])
        if other := other_separator(columns):  # before its rows are counted against it
            raise UnreadableResults(other)
        if len(columns) > MAX_CSV_COLUMNS:  # each row would be a dict of them all
            raise UnreadableResults(
                f"has {len(columns):,} columns: felab writes {len(CSV_COLUMNS)} (and reads at "
                f"most {MAX_CSV_COLUMNS}); is this the right file?"
            )
        rows, lines = [], []
        for row in reader:
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as exc:
        line = reader.reader.line_num  # the DictReader's own count lags a row behind
        if "field larger than field limit" in str(exc):
            raise UnreadableResults(
                f"line {line}: a cell longer than {csv.field_size_limit():,} characters: not a "
                "row felab writes; fix or remove the line"
            ) from None
        raise UnreadableResults(
            f"line {line}: not CSV felab can read ({exc}); fix or remove the line"
        ) from None
    if columns and re.match(r"\d{4}-\d\d-\d\d", columns[0]):  # a row read as the header
        raise UnreadableResults(
            f"line 1 is a row ({columns[0][:32]}, ...), not felab's header "
            f"({', '.join(CSV_COLUMNS[:4])}, ...): the header line was cut off; put it back "
            "first (felab bench writes it)"
        )
    twice = sorted(c for c, n in Counter(columns).items() if n > 1)
    if twice:  # csv keeps the last cell of a name: a second host would be believed
        raise UnreadableResults(
            f"has a header that names {', '.join(twice)} twice: felab writes each column "
            "once; remove the extra column"
        )
    for line, row in zip(lines, rows, strict=True):
        extra = row.pop(None, None)  # csv's key for extra cells
        if extra is not None or None in row.values():  # more or fewer cells than the header
            cells = sum(v is not None for v in row.values()) + len(extra or [])
            held = [v for v in row.values() if isinstance(v, str)]
            mixed = cells < len(columns) and any(";" in v or "\t" in v for v in held)
            raise UnreadableResults(
                f"line {line}: {cells} cell{'' if cells == 1 else 's'} where the header has "
                f"{len(columns)}: "
                + (  # a `,` header over `;` rows: the row is sound, the delimiters differ
                    "the row holds `;` or a tab where the header has `,`; save the file with "
                    "one delimiter, commas"
                    if mixed
                    else "the row is cut short or has extra cells; fix or remove it"
                )
            )
    return columns, rows, lines


def _clean(obj: Any) -> Any:
    """JSON has no NaN or infinity: write null instead. A key that is not a string becomes
    the string JSON makes of it (the seal is taken of the keys as they are read back)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k if isinstance(k, str) else json.dumps(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def write_json(path: Path, result: TargetResult) -> None:
    """The record, sealed (engine/record_seal.py): felab compare refuses it once edited."""
    make_folder_for(path, what="bench record")
    path.write_text(sealed_text(_clean(result.to_json())), encoding="utf-8")


def json_paths(path: Path, names: list[str]) -> dict[str, Path]:
    """One JSON file per target: FILE itself for one, FILE with .NAME before the suffix for more."""
    if len(names) == 1:
        return {names[0]: path}
    return {n: path.with_name(f"{path.stem}.{n}{path.suffix or '.json'}") for n in names}
