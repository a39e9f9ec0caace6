"""`felab compare A.json B.json`: did a change help, beyond the runs' own noise?

A thin adapter over felab_core.engine.compare: it reads the two records, prints one table per
load, says how the workloads differ before any figure, and draws the chart when asked.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape as esc

from felab.cli.errors import EXIT_USAGE, err
from felab.cli.output import Column, Format, Grid, emit, format_option, number, text
from felab.cli.output import slow_note as _slow_note
from felab_core.engine.compare import DEFAULT_MIN_EFFECT, Comparison, compare_records
from felab_core.engine.compare_notes import SAME_RUN
from felab_core.engine.record_reading import load_record
from felab_core.engine.record_requests import CompareError
from felab_core.engine.results import ResultsFileError, check_destinations
from felab_core.files import COMPARE_CHART, NamedFileError
from felab_core.text import loose_number_problem, with_hidden_shown

_STYLE = {"better": "green", "worse": "red"}


def _read(path: Path, say: Callable[[str], None], unsealed: bool) -> dict[str, object]:
    try:
        size = f" ({path.stat().st_size / 1e6:,.0f} MB)"
    except OSError:
        size = ""
    with _slow_note(say, f"reading {path}{size}..."):
        return load_record(path, unsealed=unsealed)


def _percent(value: str) -> float:
    raw = value.strip().removesuffix("%").strip()
    loose = loose_number_problem(raw, float)
    if loose:  # float() reads 1_0 as 10 and １ as 1
        raise CompareError(f"--min-effect {loose}")
    try:
        share = float(raw) / 100
    except ValueError:
        raise CompareError(f"--min-effect {value!r}: give a percentage, e.g. 2%") from None
    if not 0 <= share < 1:  # also refuses nan and inf
        raise CompareError(
            f"--min-effect {value!r}: give a percentage from 0 to under 100, e.g. 2%"
        )
    return share


def grids(comparison: Comparison) -> list[Grid]:
    """One grid per load: each figure in A and B, the change, its interval, the verdict."""
    out = []
    a, b = comparison.a_name, comparison.b_name
    names = {"A": a, "B": b}
    # CSV and JSON carry the data alone (the notes go to stderr): each row says it too
    unsealed = (
        "unsealed: "
        + " and ".join(f"{side} ({names[side]})" for side in comparison.unsealed)
        + " checked field by field, not proven unchanged"
        if comparison.unsealed
        else None
    )
    for pair in comparison.runs:
        grid = Grid(
            f"{pair.load}: {a} ({pair.requests_a} requests) vs {b} ({pair.requests_b})",
            [
                Column("figure", "figure"),
                Column("unit", "unit"),
                Column("a", "A", numeric=True),
                Column("b", "B", numeric=True),
                Column("change", "B - A", numeric=True),
                Column("change_pct", "change %", numeric=True),
                Column("low", "95 % from", numeric=True),
                Column("high", "95 % to", numeric=True),
                Column("verdict", "verdict"),
                *([Column("note", "note", table=False, md=False)] if unsealed else []),
            ],
            caption=f"beyond noise: the interval leaves out 0 and the change is at least "
            f"{comparison.min_effect * 100:g} % of A",
        )
        for c in pair.changes:
            digits = 1 if c.figure.unit in ("tok/s",) else (3 if c.figure.unit == "s" else 2)
            rel = None if c.relative is None else c.relative * 100
            grid.add(
                text(c.figure.label),
                text(c.figure.unit),
                number(c.a, digits),
                number(c.b, digits),
                number(c.diff, digits),
                number(rel, 1),
                number(c.low, digits),
                number(c.high, digits),
                text(c.verdict, _STYLE.get(c.verdict)),
                *([text(unsealed)] if unsealed else []),
            )
        out.append(grid)
    return out


def compare(
    a_path: Path = typer.Argument(
        ..., metavar="A.json", help="The baseline: a `felab bench --json` file."
    ),
    b_path: Path = typer.Argument(
        ..., metavar="B.json", help="The change to judge, the same load."
    ),
    min_effect: str = typer.Option(
        f"{DEFAULT_MIN_EFFECT * 100:g}%",
        "--min-effect",
        help="The smallest change worth naming, in percent of A (0 to under 100 %). Smaller "
        "differences are 'within noise' even when the interval leaves out zero.",
    ),
    chart: Path | None = typer.Option(
        None,
        "--chart",
        help="Also draw the changes with their intervals to this file: .png, .svg or .pdf.",
    ),
    unsealed: bool = typer.Option(
        False,
        "--unsealed",
        help="Compare a record without felab's seal, or one changed since felab wrote it (an "
        "older felab's, an edited one), on purpose: its figures are checked field by field, "
        "not proven unchanged, and the output says so. Without it such a record is refused.",
    ),
    fmt: Format = format_option(),
) -> None:
    """Compare two `felab bench --json` records: better, worse or within noise.

    For TTFT, ITL, TPOT, end-to-end and writing speed: the change from A to B with a 95 %
    bootstrap interval over requests, and a verdict. Runs are matched by load: the same
    --concurrency, or the same --rate (or --trace and --trace-speed) and -c cap.

    Run `felab bench llamacpp -c 8 --json a.json`, change one server flag, run it again with
    `--json b.json`, then `felab compare a.json b.json --chart change.png`.

    felab seals every record it writes (a sha256 of its contents): a record edited since, or
    one without a seal, is refused unless --unsealed.
    """
    console = Console(stderr=fmt.is_data, highlight=False)
    try:
        smallest = _percent(min_effect)  # the flags first: a typo is said before files are read
        if chart is not None:  # a name matplotlib would fill with a PNG regardless (chart.txt)
            from felab_core.reports.compare_chart import chart_format

            chart_format(chart)
            # before the work: a folder that is a file is said first, not after the table
            check_destinations(
                None,
                chart,
                what="chart",
                inputs=((a_path, "record A"), (b_path, "record B")),
                json_writes=COMPARE_CHART,
            )
        progress = Console(stderr=True, highlight=False)

        def say(line: str) -> None:
            progress.print(f"[dim]{esc(line)}[/]")

        record_a, record_b = _read(a_path, say, unsealed), _read(b_path, say, unsealed)
        with _slow_note(say, "comparing (a bootstrap over requests)..."):
            comparison = compare_records(
                record_a,
                record_b,
                a_name=with_hidden_shown(a_path.name),  # a name's escape codes act on the screen
                b_name=with_hidden_shown(b_path.name),
                min_effect=smallest,
            )
    except (CompareError, NamedFileError, ResultsFileError) as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    caveats = list(comparison.caveats)
    if os.path.samefile(a_path, b_path):  # read both times: nothing can differ
        caveats = [c for c in caveats if c != SAME_RUN]
        caveats.insert(0, "A and B are the same file: every figure is the same by construction")
    for caveat in caveats:
        console.print(f"[yellow]note:[/] {esc(caveat)}")
    emit(grids(comparison), fmt)
    if chart is not None:
        from felab_core.reports.compare_chart import draw_comparison

        try:
            drawn = draw_comparison(comparison, chart)
        except OSError as exc:
            err(f"could not write the chart to {chart}: {exc.strerror or exc}: choose another path")
            raise typer.Exit(EXIT_USAGE) from None
        except NamedFileError as exc:  # its folder's folder went missing since it was checked
            err(f"cannot write there: {exc}")
            raise typer.Exit(EXIT_USAGE) from None
        console.print(f"chart: {drawn}", markup=False)
