"""`felab numbers`: "Your numbers" from a terminal, for the day's wrap-up without Discord.

Thin commands over felab_core.numbers and felab_core.people (the calls the bot makes):
the machine and model files that set each server's speed limit, typed-in writing speeds, runs
measured by `felab bench` imported from its results CSV, the day's table with its "done when",
and the member's privacy, export and deletion. Without --member they work on this terminal's
own learner, as `felab drill` does. Bad input ends with the service's one-line message and exit
code 2; each command commits its work before saying it is done.

Long because it is several small commands (machine, model, entered figures, import, review,
show), each with help that teaches; the rules are in felab_core.numbers.
"""

from __future__ import annotations

import base64
import inspect
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab.cli.acting_for import member_for
from felab.cli.db import service_errors, sessions
from felab.cli.errors import EXIT_USAGE, err
from felab.cli.output import Cell, Column, Format, Grid, emit, format_option, plain
from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.engine.results import (
    ResultsFileError,
    UnreadableResults,
    check_destinations,
    default_csv,
    read_table_lines,
)
from felab_core.engine.server_kinds import kind_names
from felab_core.errors import Invalid
from felab_core.files import (
    MEMBER_EXPORT,
    NamedFileError,
    kind_of,
    make_folder_for,
    refuse_special,
)
from felab_core.numbers.importing import (
    ImportReport,
    check_columns,
    import_results,
)
from felab_core.numbers.progress import (
    DayNumbers,
    DoneWhenStatus,
    day_numbers,
    done_when,
    field_key_for,
    numbers_day,
)
from felab_core.numbers.recording import record_entered, speed_limit_for
from felab_core.numbers.speeds import typed_text
from felab_core.numbers.verdict import rejudge_waiting, rejudged_text
from felab_core.people.members import (
    bandwidth_bytes_per_s,
    set_hardware,
    set_public_numbers,
    update_server_model,
)
from felab_core.people.privacy import delete_member, export_member
from felab_core.redact import redact
from felab_core.sizing.speed_limit import SpeedCheck
from felab_core.sizing.units import (
    GB,
    about_text,
    decimal_size_text,
    decimal_text,
    round_half_up,
)
from felab_core.text import spreadsheet_cell

numbers_app = typer.Typer(
    name="numbers",
    help=(
        "Your numbers: each server's writing speed in tokens per second, checked against your "
        "machine's speed limit, memory bandwidth ÷ model file size.\n\n"
        "On the course's sample Mac (M4 Pro, 273 GB/s) the 4.9 GB Llama 3.1 8B file allows at "
        "most 273 ÷ 4.9 = about 56 tokens per second for one person; Day 1's sample Ollama row "
        "measured 44.6.\n\n"
        "Order: machine, then model (once per server), then enter or import, then show."
    ),
    no_args_is_help=True,
)

_MEMBER_HELP = "A member's Discord id (default: this terminal's own learner)."
_COHORT_HELP = "The member's cohort number (with --member)."
_LAB_SERVERS = ("ollama", "llamacpp", "mlx")  # the day's three; the other kinds after them
_SERVER_HELP = f"ollama, llamacpp or mlx (also {kind_names(besides=_LAB_SERVERS)})."


F = TypeVar("F", bound=Callable[..., None])


def _command(name: str, **settings: Any) -> Callable[[F], F]:
    """Register a command whose --help is its docstring with each paragraph on one line (rich
    help keeps the source's line breaks, which would wrap mid-sentence)."""

    def register(fn: F) -> F:
        doc = inspect.cleandoc(fn.__doc__ or "")
        text = "\n\n".join(" ".join(part.split()) for part in doc.split("\n\n"))
        numbers_app.command(name, help=text, **settings)(fn)
        return fn

    return register


def _console() -> Console:
    return Console(highlight=False)


def _say(console: Console, text: str) -> None:
    """Print prose as it is (no markup parsing, no hard wrapping), secrets masked: a name
    stored before felab refused a key in one (a model's, a results row's host) is shown so."""
    console.print(redact(text), markup=False, soft_wrap=True)


def _tps(value: float) -> str:
    return f"{decimal_text(Fraction(repr(value)), 1)} tok/s"


def _pct(check: SpeedCheck) -> str:
    return f"{decimal_text(check.share * 100, 0)} %"


def _limit_lines(session: Session, member: m.Member) -> list[str]:
    """The speed limit of each server whose model file felab knows."""
    lines = []
    for row in sorted(member.servers, key=lambda r: r.server):
        limit = speed_limit_for(session, member, row.server)
        if isinstance(limit, str):
            lines.append(f"{row.server}: {limit}")
        else:
            lines.append(f"{row.server}: {limit.explanation}")
    return lines


# ----------------------------------------------------------------------------- machine and model


@_command("machine")
def machine(
    chip: str | None = typer.Option(
        None, "--chip", help="Your chip by name, such as 'M4 Pro' (`felab size chips` lists them)."
    ),
    bandwidth: str | None = typer.Option(
        None,
        "--bandwidth",
        help="Or its memory bandwidth in GB/s from the maker's spec sheet, such as 273.",
    ),
    member_id: str | None = typer.Option(None, "--member", help=_MEMBER_HELP),
    cohort_id: int | None = typer.Option(None, "--cohort", help=_COHORT_HELP),
) -> None:
    """Your machine (chip or bandwidth), so felab knows your speed limit.

    One person's writing speed can never beat memory bandwidth ÷ model file size: the course's
    M4 Pro reads 273 GB/s, so with the 4.9 GB file, 273 ÷ 4.9 = about 56 tokens per second.

    Examples: felab numbers machine --chip "M4 Pro"; felab numbers machine --bandwidth 273.
    Without options it shows what felab knows.
    """
    console = _console()
    with service_errors(), session_scope(sessions()) as s:
        member = member_for(s, member_id, cohort_id)
        judged: list[m.Number] = []
        if chip is not None or bandwidth is not None:
            set_hardware(s, member, chip=chip, bandwidth_gb_s=bandwidth)
            judged = rejudge_waiting(s, member)
        bw = bandwidth_bytes_per_s(member)
        if bw is None:
            head = (
                "felab does not know your machine yet: felab numbers machine --chip 'M4 Pro' "
                "(or --bandwidth 273, in GB/s)"
            )
        else:
            gbs = decimal_text(bw / GB, 0 if (bw / GB).denominator == 1 else 2)
            head = f"Machine: {member.chip or 'given by bandwidth'}, {gbs} GB/s."
        lines = _limit_lines(s, member) if bw is not None else []
        has_models = bool(member.servers)
    _say(console, head)
    for line in lines:
        _say(console, f"  {line}")
    if judged:
        _say(console, rejudged_text(judged))
    if bw is not None and not has_models:
        _say(
            console,
            "Next: the model file each server runs, such as "
            "felab numbers model ollama --bytes 4.9GB --name llama3.1:8b",
        )


@_command("model")
def model(
    server: str = typer.Argument(..., help=_SERVER_HELP),
    size: str | None = typer.Option(
        None,
        "--bytes",
        help="The model file's size, such as 4.9GB (`ollama list` shows it; so does ls -lh).",
    ),
    name: str | None = typer.Option(
        None,
        "--name",
        help=(
            "The model as this server names it, such as llama3.1:8b (default: the name already "
            "recorded, else the one its latest measured run reported)."
        ),
    ),
    label: str | None = typer.Option(
        None,
        "--label",
        help=(
            "One label for the same model on every server, such as llama-3.1-8b-q4: runs on "
            "servers that share a label count as one model for 'done when'. '' clears it."
        ),
    ),
    member_id: str | None = typer.Option(None, "--member", help=_MEMBER_HELP),
    cohort_id: int | None = typer.Option(None, "--cohort", help=_COHORT_HELP),
) -> None:
    """The model file a server runs: its size sets that server's speed limit.

    Each server keeps its own copy: Ollama's llama3.1:8b is a 4.9 GB file, and with the M4 Pro's
    273 GB/s that allows about 56 tokens per second.

    Example: felab numbers model ollama --bytes 4.9GB --name llama3.1:8b --label llama-3.1-8b-q4
    """
    console = _console()
    with service_errors(), session_scope(sessions()) as s:
        member = member_for(s, member_id, cohort_id)
        row = update_server_model(
            s, member, server, model=name, model_bytes=size, model_label=label
        )
        size_text = (
            f", a {decimal_size_text(row.model_bytes)} file"
            if row.model_bytes
            else " (file size not given yet: --bytes 4.9GB)"
        )
        label_text = f", labelled {row.model_label}" if row.model_label else ""
        head = f"{row.server} runs {row.model}{size_text}{label_text}."
        limit = speed_limit_for(s, member, row.server)
        judged = rejudge_waiting(s, member)
    _say(console, head)
    _say(console, limit if isinstance(limit, str) else f"Speed limit: {limit.explanation}")
    if judged:
        _say(console, rejudged_text(judged))


# ----------------------------------------------------------------------------- figures


@_command("enter", context_settings={"ignore_unknown_options": True})
def enter(
    server: str = typer.Argument(..., help=_SERVER_HELP),
    value: str = typer.Argument(
        ..., help="Tokens per second as your timing script printed it, such as 44.6."
    ),
    unit: str | None = typer.Argument(
        None, help="Optional unit: tok/s (the default) or ms/token (converted)."
    ),
    day: int | None = typer.Option(
        None,
        "--day",
        min=1,
        max=366,
        help="The course day whose field it fills (default: Day 2's).",
    ),
    member_id: str | None = typer.Option(None, "--member", help=_MEMBER_HELP),
    cohort_id: int | None = typer.Option(None, "--cohort", help=_COHORT_HELP),
) -> None:
    """Type in a writing speed: tokens one person sees appear each second once the reply starts.

    Example: felab numbers enter ollama 44.6 (Day 1's sample Ollama row, about 33 words a
    second). It is set beside your speed limit (M4 Pro with the 4.9 GB file: about 56); a figure
    above the limit is kept but flagged with the likely cause. Typed-in figures do not count for
    the day's "done when": runs measured by felab bench do (felab numbers import).
    """
    console = _console()
    with service_errors(), session_scope(sessions()) as s:
        member = member_for(s, member_id, cohort_id)
        day_number = day if day is not None else numbers_day(s, member, datetime.now(UTC))
        key = field_key_for(s, day_number, server) if day_number is not None else None
        out = record_entered(s, member, server, value, unit=unit, field_key=key)
        label = (
            s.scalar(select(m.NumberField.label).where(m.NumberField.key == key))
            if key is not None
            else None
        )
    where = f"Day {day_number}, {label}" if label else out.number.server
    lines = [f"Recorded {typed_text(out.number)} for {where} (typed in)."]
    if key is None:
        asked = f"day {day_number}" if day_number is not None else "the loaded content"
        lines.append(
            f"{asked.capitalize()} does not ask for {out.number.server}; kept all the same."
        )
    if out.note:
        lines.append(out.note)
    check = out.comparison.check
    if check is None:  # stored "unverified": off the boards until its limit can be computed
        lines.append(f"Kept, but unverified (not ranked yet): {out.comparison.missing}")
    elif check.impossible:
        lines.append(f"Kept, but flagged: {check.explanation}")
    else:
        lines.append(check.explanation)
    lines.append(
        "Typed-in figures do not count for the day's 'done when': time the server with "
        "`felab bench`, then `felab numbers import`."
    )
    for line in lines:
        _say(console, line)


def _done_lines(status: DoneWhenStatus) -> list[str]:
    lines = [f"Done when: {status.text}"] if status.text else []
    if status.done:
        if status.servers:
            figures = ", ".join(f"{k} {_tps(v)}" for k, v in sorted(status.best.items()))
            lines.append(
                f"Done: {status.message} (preset {status.preset}, model {status.model}): {figures}."
            )
        else:
            lines.append(f"Done: {status.message}.")
    else:
        lines.append(f"Not yet: {status.message}.")
    return lines


@_command("import")
def import_cmd(
    csv_path: Path | None = typer.Argument(
        None,
        help=(
            "A results CSV written by felab bench (default: results/01-latency.csv, in "
            "FELAB_RESULTS_DIR)."
        ),
    ),
    member_id: str | None = typer.Option(None, "--member", help=_MEMBER_HELP),
    cohort_id: int | None = typer.Option(None, "--cohort", help=_COHORT_HELP),
    skip_invalid: bool = typer.Option(
        False,
        "--skip-invalid",
        help="Import the sound rows and skip the ones with impossible values (each said with "
        "its line); without it, one such row stores nothing.",
    ),
) -> None:
    """Record the runs felab bench measured, from its results CSV: these count for "done when".

    One person at a time (concurrency 1) with a writing speed becomes a measured number; other
    rows are kept as results only, and rows without a preset or model are skipped, each with
    the reason. A row with an impossible value (a negative, NaN, infinite or absurd figure, an
    unknown server) stops the import with its line number and nothing stored, unless
    --skip-invalid. Importing the same file twice records nothing new.
    """
    path = csv_path if csv_path is not None else default_csv()
    try:
        present = refuse_special(path, what="results CSV")
    except NamedFileError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    if present is None:
        above = next((p for p in path.parents if p.exists()), None)
        if above is not None and not above.is_dir():  # FELAB_RESULTS_DIR naming a file, say
            err(f"cannot read {path}: {above} is a file, not a folder; check FELAB_RESULTS_DIR")
        else:
            err(
                f"no results file at {path}: time your servers with `felab bench` first, or "
                "give the CSV's path"
            )
        raise typer.Exit(EXIT_USAGE)
    try:
        columns, rows, lines = read_table_lines(path)
        check_columns(columns)
    except UnreadableResults as exc:
        advice = ": save it as UTF-8 (CSV UTF-8)" if exc.not_utf8 else ""
        err(f"{path} {exc}{advice}")
        raise typer.Exit(EXIT_USAGE) from None
    except OSError as exc:
        err(f"cannot read {path}: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    except Invalid as exc:
        err(f"{path}: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    console = _console()
    if not rows:  # nothing to store: the database is not opened
        _say(console, f"{path} has no rows yet: time your servers with `felab bench`.")
        return
    with service_errors(), session_scope(sessions()) as s:
        member = member_for(s, member_id, cohort_id)
        with _late_bar("checking and storing rows") as tick:
            report = import_results(
                s, member, rows, skip_invalid=skip_invalid, progress=tick, lines=lines
            )
        day_number = numbers_day(s, member, datetime.now(UTC))
        status = done_when(s, member, day_number) if day_number is not None else None
    _import_summary(console, path, report)
    if status is not None and report.new:
        for line in _done_lines(status):
            _say(console, line)


#: Rows the import names one by one; past that, the counts say the rest.
_SHOWN_ROWS = 50


@contextmanager
def _late_bar(label: str, after_s: float = 1.0) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr that appears only once the work has taken `after_s`."""
    started = time.monotonic()
    bar: Progress | None = None
    task: TaskID | None = None

    def tick(done: int, total: int) -> None:
        nonlocal bar, task
        if bar is None:
            if time.monotonic() - started < after_s:
                return
            bar = Progress(
                TextColumn(label),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            bar.start()
            task = bar.add_task(label, total=total)
        assert task is not None
        bar.update(task, completed=done, total=total)

    try:
        yield tick
    finally:
        if bar is not None:
            bar.stop()


def _import_summary(console: Console, path: Path, report: ImportReport) -> None:
    if not report.rows:
        _say(console, f"{path} has no rows yet: time your servers with `felab bench`.")
        return
    shown = 0
    for r in report.rows:
        if r.outcome == "already imported":
            continue
        shown += 1
        if shown > _SHOWN_ROWS:
            continue
        what = f"line {r.line}: {r.server or '?'} {r.model or '?'} (preset {r.preset or 'none'})"
        if r.outcome == "recorded" and r.tokens_per_s is not None:
            review = "; an instructor reviews it" if r.reason.startswith("flagged") else ""
            flag = f" ({r.reason}{review})" if r.reason else ""
            _say(console, f"{what}: recorded {_tps(r.tokens_per_s)}{flag}")
        elif r.outcome in ("result only", "skipped"):
            _say(console, f"{what}: {r.outcome}: {r.reason}")
    if shown > _SHOWN_ROWS:
        _say(console, f"... and {shown - _SHOWN_ROWS:,} more rows (the counts below).")
    done = report.with_outcome("already imported")
    if done:
        lines = ", ".join(str(r.line) for r in done[:_SHOWN_ROWS])
        if len(done) > _SHOWN_ROWS:
            lines += f", ... {done[-1].line}"
        _say(console, f"Already imported, not recorded again: {len(done)} row(s) (line {lines}).")
    counts = [
        f"{len(report.with_outcome(o))} {o}"
        for o in ("recorded", "result only", "skipped")
        if report.with_outcome(o)
    ]
    if not report.new:
        _say(console, f"Nothing new from {path}." + (f" ({', '.join(counts)})" if counts else ""))
    else:
        _say(console, f"From {path}: {', '.join(counts)}.")


# ----------------------------------------------------------------------------- the day's table


def _tps_cell(value: float | None) -> Cell:
    if value is None:
        return Cell("-", None)
    return Cell(_tps(value), float(round_half_up(Fraction(repr(value)), 1)))


def _entered_cell(number: m.Number | None) -> Cell:
    """A typed-in figure as typed (22.4 ms/token beside its tokens per second); CSV and JSON
    carry its tokens per second, as the other columns."""
    if number is None:
        return Cell("-", None)
    return Cell(typed_text(number), _tps_cell(number.value).value)


def _grid(view: DayNumbers, *, for_spreadsheet: bool = False) -> Grid:
    """The day's table; CSV and JSON carry each figure in its own column. `for_spreadsheet`:
    a name a spreadsheet would run as a formula is kept as text (a model '@SUM(1+1)*cmd|...'
    an older felab stored; eighteenth sweep, a2 M6)."""

    def data(text: str | None) -> str | None:
        return str(spreadsheet_cell(text)) if for_spreadsheet and text else text

    grid = Grid(
        f"Day {view.day}: your numbers",
        [
            Column("field", "Field"),
            Column("server", "server", table=False),
            Column("entered_tps", "Entered"),
            Column("measured_tps", "Measured"),
            Column("measured_preset", "preset", table=False),
            Column("measured_model", "model", table=False),
            Column("limit_tps", "Speed limit"),
            Column("share", "% of limit", data=False),
            Column("entered_pct", "entered % of limit", table=False),
            Column("measured_pct", "measured % of limit", table=False),
            Column("flags", "Flags"),
        ],
    )
    for row in view.rows:
        measured = _tps_cell(row.measured.value if row.measured else None)
        preset = model = None
        if row.measured is not None:
            preset, model = row.measured.preset, row.measured.model
            if preset or model:
                below = f"{preset or ''} {model or ''}".rstrip()
                measured = Cell(f"{measured.text}\n{below}", measured.value)
        if isinstance(row.limit, str):
            limit = Cell("unknown", None)
        else:
            tps = row.limit.tokens_per_second
            limit = Cell(f"{about_text(tps)} tok/s", float(round_half_up(Fraction(tps), 2)))
        pcts = [
            None if check is None else int(round_half_up(Fraction(check.share * 100), 0))
            for check in (row.entered_check, row.measured_check)
        ]
        share = [
            f"{what} {_pct(check)}"
            for what, check in (("entered", row.entered_check), ("measured", row.measured_check))
            if check is not None
        ]
        grid.add(
            Cell(row.field.label, data(row.field.label)),
            Cell(row.field.server, row.field.server),
            _entered_cell(row.entered),
            measured,
            Cell(preset or "", data(preset)),
            Cell(model or "", data(model)),
            limit,
            Cell("\n".join(share) or "-", None),
            Cell("-" if pcts[0] is None else f"{pcts[0]} %", pcts[0]),
            Cell("-" if pcts[1] is None else f"{pcts[1]} %", pcts[1]),
            Cell("\n".join(row.flags), "; ".join(row.flags)),
        )
    return grid


@_command("show")
def show(
    day: int | None = typer.Option(
        None,
        "--day",
        min=1,
        max=366,
        help="The course day (default: the day asking for numbers, Day 2).",
    ),
    member_id: str | None = typer.Option(None, "--member", help=_MEMBER_HELP),
    cohort_id: int | None = typer.Option(None, "--cohort", help=_COHORT_HELP),
    fmt: Format = format_option(),
) -> None:
    """The day's numbers: typed-in and measured side by side, as a share of your speed limit.

    Runs usually land at 55-85 % of the limit (44.6 of about 56 is 80 %); a figure above 100 %
    is impossible, and the flag says what usually causes it. Ends with the day's "done when":
    every server measured by felab bench with one preset and one model.
    """
    console = _console()
    with service_errors(), session_scope(sessions()) as s:
        member = member_for(s, member_id, cohort_id)
        day_number = day if day is not None else numbers_day(s, member, datetime.now(UTC))
        if day_number is None:
            err(
                "no day in the loaded content asks for numbers: load the course with "
                "`felab content load content/`"
            )
            raise typer.Exit(EXIT_USAGE)
        view = day_numbers(s, member, day_number)
    if not view.rows:
        _say(console, f"Day {view.day} ({view.title}) asks for no numbers.")
        for line in _done_lines(view.done):
            _say(console, line)
        return
    emit(_grid(view, for_spreadsheet=fmt is Format.csv), fmt, console)
    notes = Console(stderr=True, highlight=False) if fmt.is_data else console
    for row in view.rows:
        for note in row.notes:
            _say(notes, f"{row.field.label}: {note}")
        if row.entered is None and row.measured is None and row.field.hint:
            _say(notes, f"{row.field.label}: hint: {row.field.hint}")
    for line in _done_lines(view.done):
        _say(notes, line)


# ----------------------------------------------------------------------------- privacy


@_command("privacy")
def privacy(
    public: bool | None = typer.Option(
        None,
        "--public/--private",
        help="Show your numbers on public leaderboards, or keep them off (instructors see them).",
    ),
    member_id: str | None = typer.Option(None, "--member", help=_MEMBER_HELP),
    cohort_id: int | None = typer.Option(None, "--cohort", help=_COHORT_HELP),
) -> None:
    """Whether your numbers appear on public leaderboards; without an option, says which."""
    with service_errors(), session_scope(sessions()) as s:
        member = member_for(s, member_id, cohort_id)
        if public is not None:
            set_public_numbers(s, member, public)
        state = member.public_numbers
    _say(
        _console(),
        "Your numbers are public: they can appear on leaderboards."
        if state
        else "Your numbers are private: kept off public leaderboards (your instructors still "
        "see them).",
    )


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _one_or_many(key: str, count: int) -> str:
    """An export's list name in words, singular for one: 'bench_jobs_requested' -> 'bench job
    requested', 'ratings_given' -> 'rating given', 'numbers' -> 'number'."""
    words = key.split("_")
    if count == 1:
        plural = next((i for i, w in enumerate(words) if w.endswith("s")), None)
        if plural is not None:
            words[plural] = words[plural][:-1]
    return " ".join(words)


#: Names a spreadsheet opens as a table: an export (JSON) under one is read as junk.
_TABLE_SUFFIXES = (".csv", ".tsv", ".xlsx", ".xls", ".ods")


@_command("export")
def export(
    file: Path = typer.Argument(..., help="Where to write the JSON ('-' prints it)."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Replace FILE even if it is not an earlier export (an earlier one is replaced).",
    ),
    member_id: str | None = typer.Option(None, "--member", help=_MEMBER_HELP),
    cohort_id: int | None = typer.Option(None, "--cohort", help=_COHORT_HELP),
) -> None:
    """Everything felab holds about you, as JSON: machine, models, numbers, runs, reviews."""
    if file.suffix.lower() in _TABLE_SUFFIXES:  # JSON under me.csv: a spreadsheet shows junk
        err(
            f"{file}: felab numbers export writes JSON, and the name ends in {file.suffix}; "
            "name it .json (felab numbers show -o csv writes the day's table as CSV)"
        )
        raise typer.Exit(EXIT_USAGE)
    try:
        if str(file) != "-":  # also a folder that is a file, or one felab cannot write in
            check_destinations(
                None, file, what="export", json_writes=MEMBER_EXPORT, replaces_others=force
            )
    except ResultsFileError as exc:
        plain = (  # a plain file of someone's: --force would replace it (never open a pipe)
            not force and file.is_file() and not file.is_symlink() and kind_of(file) is None
        )
        err(f"{exc}{', or add --force to replace it' if plain else ''}")
        raise typer.Exit(EXIT_USAGE) from None
    with service_errors(), session_scope(sessions()) as s:
        member = member_for(s, member_id, cohort_id)
        data = export_member(s, member.id)
    text = json.dumps(data, indent=1, ensure_ascii=False, default=_json_value) + "\n"
    if str(file) == "-":
        typer.echo(text, nl=False)
        return
    try:
        make_folder_for(file, what="export")  # one missing folder, as bench, memo and backup
        file.write_text(text, encoding="utf-8")
    except NamedFileError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    except OSError as exc:
        err(f"cannot write {file}: {exc.strerror or exc}; choose another path")
        raise typer.Exit(EXIT_USAGE) from None
    counts = ", ".join(
        f"{len(v)} {_one_or_many(k, len(v))}" for k, v in data.items() if isinstance(v, list) and v
    )
    _say(_console(), f"Wrote {file}: {counts or 'your member record'}.")


@_command("delete")
def delete(
    yes: bool = typer.Option(False, "--yes", help="Confirm: delete it all, now."),
    member_id: str | None = typer.Option(None, "--member", help=_MEMBER_HELP),
    cohort_id: int | None = typer.Option(None, "--cohort", help=_COHORT_HELP),
) -> None:
    """Delete everything felab holds about you (numbers, runs, reviews, answers, machine).

    There is no undo: take a copy first with felab numbers export FILE.
    """
    if not yes:
        err(
            "this deletes everything felab holds about the member, with no undo: take a copy "
            "with `felab numbers export FILE`, then run again with --yes"
        )
        raise typer.Exit(EXIT_USAGE)
    with service_errors(), session_scope(sessions()) as s:
        member = member_for(s, member_id, cohort_id)
        who = member.display_name or member.discord_id
        counts = delete_member(s, member.id, confirm=member.discord_id)
    posts = counts.pop("chat_posts", 0)
    removed = [f"{n} {k.replace('_', ' ')}" for k, n in counts.items() if n and k != "members"]
    text = f"Deleted everything felab held about {who}: " + ", ".join(
        [*removed, "the member record"]
    )
    if posts:
        text += (
            f". The bot removes the {posts} message{'s' if posts != 1 else ''} it posted about "
            "them in Discord at its next look"
        )
    _say(_console(), text + ".")


@_command("review")
def review_cmd(
    approve: int = typer.Option(None, "--approve", help="Approve this flagged figure (its id)."),
    member: str = typer.Option(None, "--member", help="The instructor's Discord id."),
    cohort: int = typer.Option(None, "--cohort", help=_COHORT_HELP),
) -> None:
    """Figures kept off the leaderboards, measured or typed in: flagged ones (above the machine's
    speed limit, or at odds with their own request records) wait for an instructor; unverified
    ones wait for the member's chip and model size.

    `--approve ID` (an instructor of the member's cohort) ranks a flagged figure you have checked,
    such as a server with speculative decoding.
    """
    from felab_core.numbers.verdict import approve as approve_number
    from felab_core.reports.leaderboard import unranked

    console = _console()
    with service_errors(), session_scope(sessions()) as session:
        who = member_for(session, member, cohort)
        if approve is not None:
            number = approve_number(session, who, approve)
            _say(console, f"approved: figure {number.id} ({number.value:,.1f} tokens/s) now ranks")
            return
        rows = unranked(session, who.cohort_id)
        if not rows:
            _say(console, "nothing waiting: every figure passed its checks")
            return
        table = Table("id", "member", "server", "tokens/s", "how", "state", "why")
        for r in rows:
            how = "measured" if r.source == "measured" else "typed in"
            table.add_row(
                *map(
                    plain,
                    (str(r.number_id), r.name, r.server, f"{r.value:,.1f}", how, r.verdict, r.note),
                )
            )
        console.print(table)
