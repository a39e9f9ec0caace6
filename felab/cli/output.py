"""Tables people paste: one grid of cells, printed as a terminal table, Markdown, CSV or JSON.

`--format table|md|csv|json` (and `-o`, as llama-bench has it) on `felab bench`, `felab size`
and `felab numbers show`. A number is never cut short: every column folds instead of ending in
"…", and when stdout is not a terminal (a file, a pipe, CI) the table is printed at its natural
width rather than squeezed to 80 columns. Each cell carries its text for the table and its value
for CSV and JSON, rounded to the digits the table shows, so all four formats say the same thing.
"""

from __future__ import annotations

import csv
import io
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from felab_core.text import spreadsheet_cell, with_hidden_shown

Value = str | int | float | None


class LogLevel(StrEnum):
    """A log level, as Python's logging and Celery name them (a typo is refused by name)."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


class Format(StrEnum):
    """How a command prints its table."""

    table = "table"
    md = "md"
    csv = "csv"
    json = "json"

    @property
    def is_data(self) -> bool:
        """CSV and JSON: stdout holds the data alone, so notes go to stderr."""
        return self in (Format.csv, Format.json)


def format_option() -> Format:
    """The `--format/-o` option every table-printing command takes."""
    option: Format = typer.Option(
        Format.table,
        "--format",
        "-o",
        help="table (the default), md (a GitHub table), csv or json (the data alone on stdout).",
        case_sensitive=False,
    )
    return option


@dataclass(frozen=True)
class Column:
    """A column: `key` names it in CSV and JSON, `header` in the table and Markdown.

    `table`/`data`: whether it shows in the terminal table, and in CSV and JSON (a table may
    merge two data columns into one cell, such as a server with its model below). Markdown shows
    the columns in both, unless `md` says otherwise."""

    key: str
    header: str
    numeric: bool = False
    table: bool = True
    data: bool = True
    md: bool | None = None

    @property
    def in_md(self) -> bool:
        return self.md if self.md is not None else self.table and self.data


@dataclass(frozen=True)
class Cell:
    text: str  # as the table shows it
    value: Value  # as CSV and JSON carry it: the same number, without thousands separators
    style: str | None = None


def plain(value: object, style: str | None = None) -> Text:
    """A table cell of words from outside (a machine's failure, a member's name, a server's
    model): shown as written, never as Rich markup, each control or invisible character as '?'
    (an escape code cleared an instructor's screen). A line break stays one: a cell's lines
    stay inside the cell (felab's "server\nmodel" cells had read "custom?m")."""
    lines = str(value).split("\n")
    return Text("\n".join(with_hidden_shown(line) for line in lines), style=style or "")


def text(value: str | None, style: str | None = None) -> Cell:
    return Cell("-" if value is None else value, value, style)


def number(value: float | int | None, digits: int = 1, scale: float = 1.0) -> Cell:
    """A number shown with `digits` decimals (thousands separated); its value rounded alike."""
    if value is None:
        return Cell("-", None)
    shown = value * scale
    if digits == 0:
        whole = round(shown)
        return Cell(f"{whole:,d}", whole)
    rounded = round(float(shown), digits)
    return Cell(f"{rounded:,.{digits}f}", rounded)


@dataclass
class Grid:
    title: str
    columns: list[Column]
    rows: list[list[Cell]] = field(default_factory=list)
    caption: str = ""

    def add(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))

    def _picked(self, where: str) -> list[int]:
        """The columns shown in the "table", "md" or "data" (CSV and JSON)."""
        return [
            i
            for i, c in enumerate(self.columns)
            if {"table": c.table, "md": c.in_md, "data": c.data}[where]
        ]

    def records(self) -> list[dict[str, Value]]:
        """The rows as CSV and JSON carry them: data columns by key."""
        keep = self._picked("data")
        return [{self.columns[i].key: row[i].value for i in keep} for row in self.rows]


def rich_table(grid: Grid) -> Table:
    """The terminal table: every column folds, so no digit is ever replaced by "…"."""
    table = Table(  # titles hold names from files and servers: text, never markup ("[/]")
        title=Text(grid.title, style="table.title") if grid.title else None,
        caption=Text(grid.caption, style="table.caption") if grid.caption else None,
    )
    keep = grid._picked("table")
    for i in keep:
        col = grid.columns[i]
        table.add_column(col.header, justify="right" if col.numeric else "left", overflow="fold")
    for row in grid.rows:
        table.add_row(*(plain(row[i].text, row[i].style) for i in keep))
    return table


def print_table(console: Console, table: Table) -> None:
    """Print a rich table; off a terminal, at its natural width (never squeezed to 80)."""
    if console.is_terminal:
        console.print(table)
        return
    wide = console.options.update_width(100_000)
    width = Measurement.get(console, wide, table).maximum
    Console(file=console.file, width=max(width, 20), highlight=False, color_system=None).print(
        table
    )


#: What GitHub reads as markup in a table cell: a server's model id "[click](http://x)" or
#: "<img ...>" had become a live link or image in a pasted table.
_MD_MARKUP = re.compile(r"([\\`*_\[\]<>|~])")


def _md_cell(value: str) -> str:
    return _MD_MARKUP.sub(r"\\\1", value).replace("\n", "<br>")


def markdown(grid: Grid) -> str:
    """A GitHub table (title in bold above it, caption below)."""
    keep = grid._picked("md")
    cols = [grid.columns[i] for i in keep]
    lines = [f"**{_md_cell(grid.title)}**", ""] if grid.title else []
    lines.append("| " + " | ".join(_md_cell(c.header.replace("\n", " ")) for c in cols) + " |")
    lines.append("|" + "|".join("---:" if c.numeric else "---" for c in cols) + "|")
    for row in grid.rows:
        lines.append("| " + " | ".join(_md_cell(row[i].text) for i in keep) + " |")
    if grid.caption:
        lines += ["", _md_cell(grid.caption)]
    return "\n".join(lines) + "\n"


def csv_text(grid: Grid) -> str:
    """The data columns as CSV; a name from a server or file that a spreadsheet would run as a
    formula (`=HYPERLINK(...)`) is kept as text, as the numbers and leaderboard CSVs keep it."""
    out = io.StringIO()
    keys = [grid.columns[i].key for i in grid._picked("data")]
    writer = csv.DictWriter(out, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    for record in grid.records():
        writer.writerow({k: "" if v is None else spreadsheet_cell(v) for k, v in record.items()})
    return out.getvalue()


def json_text(grids: Sequence[Grid]) -> str:
    """One grid: its rows, a list of objects. Several: an object of row lists by title."""
    if len(grids) == 1:
        return json.dumps(grids[0].records(), indent=1, ensure_ascii=False) + "\n"
    return json.dumps({g.title: g.records() for g in grids}, indent=1, ensure_ascii=False) + "\n"


def emit(grids: Grid | Sequence[Grid], fmt: Format, console: Console | None = None) -> None:
    """Print grids to stdout in `fmt` (tables through `console`, else plain text)."""
    many = [grids] if isinstance(grids, Grid) else list(grids)
    out: IO[str]
    if fmt is Format.table:
        con = console or Console(highlight=False)
        for grid in many:
            print_table(con, rich_table(grid))
        return
    out = console.file if console is not None else typer.get_text_stream("stdout")
    if fmt is Format.md:
        out.write("\n".join(markdown(g) for g in many))
    elif fmt is Format.csv:
        out.write("\n".join(csv_text(g) for g in many))
    else:
        out.write(json_text(many))
    out.flush()


@contextmanager
def slow_note(say: Callable[[str], None], what: str, after_s: float = 1.0) -> Iterator[None]:
    """Say what is being done, on stderr, only when it takes longer than a second: a record of
    a million requests takes a while to read, a backup of millions of reviews a while to
    check, and silence looks like a hang."""
    timer = threading.Timer(after_s, say, (what,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
