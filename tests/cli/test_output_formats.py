"""Tables people paste: `--format table|md|csv|json` say the same numbers, to the digit, and a
table written to a file or a pipe is printed whole (never squeezed to 80 columns and cut)."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from felab.cli.bench import comparison_grid
from felab.cli.output import Format, Grid, emit
from felab_core.engine.bench import run_bench
from felab_core.engine.event_loop import run_sync
from felab_core.engine.targets import load_targets, resolve_target
from felab_core.engine.workloads import PRESETS
from felab_core.lab.scripted_server import Script, ScriptedServer

FELAB = str(Path(sys.executable).with_name("felab"))


@pytest.fixture
def fast_server() -> Iterator[ScriptedServer]:
    """A server fast enough that speeds need thousands separators (3,333 tok/s: at 10,000 its
    late sleeps sent tokens back to back, a burst with no writing speed: engine/bursts.py)."""
    server = ScriptedServer(
        Script(persona="llamacpp", itl_s=0.0003, ttft_s=0.001)
    ).start_in_thread()
    yield server
    server.stop_thread()


def _expected(record: dict[str, Any]) -> list[str]:
    """The figures of each run as the table must show them, from the run's own JSON record."""
    out = []
    for run in record["runs"]:
        s = run["summary"]
        out += [
            f"{s['writing_tps']['p50']:,.1f}",
            f"{s['ttft_s']['p50'] * 1e3:,.1f}",
            f"{s['ttft_s']['p95'] * 1e3:,.1f}",
            f"{s['e2e_s']['p50']:,.2f}",
            f"{s['output_tps']:,.1f}",
            f"{s['server_tps']['p50']:,.1f}",
        ]
    return out


@pytest.mark.parametrize("how", ["file", "pipe"])
def test_a_table_off_a_terminal_shows_every_digit(
    how: str, tmp_path: Path, fast_server: ScriptedServer
) -> None:
    record = tmp_path / "run.json"
    args = [FELAB, "bench", "llamacpp", "--url", fast_server.base_url, "--preset", "quick"]
    args += ["-c", "1,4", "--no-csv", "--json", str(record)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "", "TERM": "dumb"}
    if how == "file":
        out = tmp_path / "out.txt"
        with out.open("w") as f:
            done = subprocess.run(args, stdout=f, stderr=subprocess.PIPE, env=env, timeout=120)
        text = out.read_text()
    else:
        line = " ".join(f"'{a}'" for a in args) + " | cat"
        done = subprocess.run(line, shell=True, capture_output=True, env=env, timeout=120)
        text = done.stdout.decode()
    assert done.returncode == 0, done.stderr
    assert "…" not in text
    assert "writing" in text and "TTFT p95" in text and "server / model" in text
    figures = _expected(json.loads(record.read_text()))
    assert any("," in f for f in figures)  # the run is fast enough to need separators
    for figure in figures:
        assert figure in text, f"{figure} missing from:\n{text}"
    assert max(len(line) for line in text.splitlines()) > 80  # wider than a squeezed table


def _numbers(cells: list[str]) -> list[float | None]:
    out: list[float | None] = []
    for c in cells:
        c = c.strip()
        out.append(None if c in ("", "-", "null") else float(c.replace(",", "")))
    return out


def _table_rows(text: str) -> list[list[str]]:
    """Body rows of a rich table printed without colour: the first line of each row."""
    rows = []
    for line in text.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            if cells[1]:  # a row's first line has the users figure; its model line does not
                rows.append(cells)
    return rows


def test_md_csv_and_json_carry_the_table_s_numbers(fast_server: ScriptedServer) -> None:
    target = resolve_target("llamacpp", targets=load_targets(None), url=fast_server.base_url)
    workload = PRESETS["quick"].workload.with_overrides(concurrency=(1, 4))
    grid: Grid = comparison_grid(run_sync(run_bench([target], workload)))

    def render(fmt: Format) -> str:
        buf = io.StringIO()
        emit(grid, fmt, Console(file=buf, width=80, color_system=None))
        return buf.getvalue()

    table, md, data_csv, data_json = (render(f) for f in Format)
    keys = [c.key for c in grid.columns if c.data]
    numeric = [c.key for c in grid.columns if c.data and c.table and c.numeric]
    records = json.loads(data_json)
    assert [list(r) for r in records] == [keys] * len(grid.rows)
    from_csv = list(csv.DictReader(io.StringIO(data_csv)))
    assert len(from_csv) == len(records) == 2
    # The table (its numeric columns, right of the server/model column) says what JSON says.
    table_rows = _table_rows(table)
    assert len(table_rows) == 2
    for shown, rec, row in zip(table_rows, records, from_csv, strict=True):
        want = [rec[k] for k in numeric]
        assert _numbers(shown[1:]) == want
        assert _numbers([row[k] for k in numeric]) == want
        assert rec["target"] == row["target"] == "llamacpp"
    # Markdown: a GitHub table (title, header, alignment row, one line per run).
    lines = [line for line in md.splitlines() if line.startswith("|")]
    header, align, *body = lines
    assert re.fullmatch(r"\|(---:?\|)+", align)
    md_keys = [c.key for c in grid.columns if c.in_md]
    assert {"target", "model", *numeric} <= set(md_keys)
    assert header.count("|") == align.count("|") == body[0].count("|") == len(md_keys) + 1
    for line, rec in zip(body, records, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert _numbers([cells[md_keys.index(k)] for k in numeric]) == [rec[k] for k in numeric]


@pytest.mark.parametrize(
    "args",
    [
        ["size", "chips", "--model-bytes", "4.9GB"],
        ["size", "capacity", "--blocks", "8234", "--max-len", "8192"],
    ],
)
def test_size_tables_in_every_format_say_the_same(args: list[str]) -> None:
    from typer.testing import CliRunner

    from felab.cli.main import app

    runner = CliRunner()

    def run(fmt: str) -> str:
        done = runner.invoke(app, [*args, "--format", fmt], env={"COLUMNS": "80"})
        assert done.exit_code == 0, done.output
        return done.stdout

    records = json.loads(run("json"))
    keys = list(records[0])
    assert list(csv.DictReader(io.StringIO(run("csv")))) == [
        {k: "" if v is None else str(v) for k, v in r.items()} for r in records
    ]
    md = [line for line in run("md").splitlines() if line.startswith("| ")]
    assert md[0].split("|")[1].strip() == ("chip" if "chips" in args else "setting")
    table = [
        [c.strip() for c in line.strip("│").split("│")]
        for line in run("table").splitlines()
        if line.startswith("│")
    ]
    assert len(table) == len(md) - 1 == len(records)  # one line a row: printed at natural width
    for row, line, rec in zip(table, md[1:], records, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        for i, key in enumerate(keys):
            value = rec[key]
            if isinstance(value, int | float):
                shown = re.sub(r"[^0-9.]", "", row[i].split(" ")[0])
                assert (
                    float(shown) == value == float(re.sub(r"[^0-9.]", "", cells[i].split(" ")[0]))
                )
            else:
                assert row[i] == cells[i] == value


def test_words_from_outside_print_as_written_never_as_markup_or_escapes() -> None:
    """Sixteenth sweep (b) F7: a machine's failure printed `[link=...]` as a live link and
    ESC[2J cleared the instructor's screen (`felab worker jobs`)."""
    from rich.console import Console
    from rich.table import Table

    from felab.cli.output import plain

    console = Console(record=True, width=200, force_terminal=True)
    table = Table("reason")
    table.add_row(plain("\x1b[2J[bold]m[/] [link=http://evil]x[/link] \u202eevil"))
    console.print(table)
    shown = console.export_text(styles=False)
    assert "?[2J[bold]m[/] [link=http://evil]x[/link] ?evil" in shown
    assert "\x1b" not in shown and "\u202e" not in shown


def test_a_cell_s_own_line_break_stays_a_line_break() -> None:
    """Seventeenth sweep (a2) L1: every bench table's "server / model" cell read `custom?m`."""
    from felab.cli.output import plain

    assert plain("custom\nm").plain == "custom\nm"
    assert plain("a\x1b[2J\nb\rc").plain == "a?[2J\nb?c"


def test_markdown_cells_keep_a_servers_words_as_text() -> None:
    """Eighteenth sweep (a) L5: a server's model id "[click](http://e.vil)" became a live link
    in the GitHub table (only '|' was escaped)."""
    from felab.cli.output import Column, markdown, text

    grid = Grid("t", [Column("model", "model")])
    grid.add(text("[click](http://e.vil) <img src=x> **b** `c`"))
    row = markdown(grid).splitlines()[-1]
    assert row == r"| \[click\](http://e.vil) \<img src=x\> \*\*b\*\* \`c\` |"


def test_csv_cells_that_a_spreadsheet_would_run_stay_text() -> None:
    """Twentieth sweep: `-o csv` wrote a server's model id `=HYPERLINK(...)` as a live formula,
    where the numbers and leaderboard CSVs already kept such a name as text."""
    from felab.cli.output import Column, csv_text, number, text

    grid = Grid("t", [Column("model", "model"), Column("tps", "tps", numeric=True)])
    grid.add(text('=HYPERLINK("http://e.vil","x")'), number(-0.5))
    rows = list(csv.DictReader(io.StringIO(csv_text(grid))))
    assert rows == [{"model": '\'=HYPERLINK("http://e.vil","x")', "tps": "-0.5"}]
