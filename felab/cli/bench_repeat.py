"""`felab bench --repeat N`: the same workload N times, each figure with its 95 % interval.

A thin adapter over felab_core.engine.repeats: it runs the bench N times (each repeat saved as
an ordinary run: a CSV row, and FILE.rK.json with --json), then prints one table of intervals.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape as esc

from felab.cli.bench_plan import repeat_path
from felab.cli.output import Column, Format, Grid, emit, number, text
from felab_core.engine.bench import BenchOutcome, save_outcomes
from felab_core.engine.loads import run_load
from felab_core.engine.repeats import intervals, measured
from felab_core.failures import EXIT_INTERRUPTED
from felab_core.text import counted


def interval_grid(repeats: list[list[BenchOutcome]]) -> Grid:
    """One row per target, load and figure: the mean over repeats and its 95 % interval."""
    n = len(repeats)
    grid = Grid(
        f"felab bench, {n} repeats: mean and 95 % interval of each figure",
        [
            Column("target", "server"),
            Column("load", "load"),
            Column("figure", "figure"),
            Column("unit", "unit"),
            Column("mean", "mean", numeric=True),
            Column("half_width", "± 95 %", numeric=True),
            Column("relative_pct", "± %", numeric=True),
            Column("min", "min", numeric=True),
            Column("max", "max", numeric=True),
        ],
        caption="Student-t interval over the repeats' own figures: where the next run may land",
    )
    for i, outcome in enumerate(repeats[0]):
        if outcome.result is None:
            continue
        for k, run in enumerate(outcome.result.runs):
            summaries = []
            for rep in repeats:
                result = rep[i].result
                if result is not None and k < len(result.runs):
                    summaries.append(result.runs[k].summary)
            for iv in intervals(summaries):
                digits = 1 if iv.headline.unit == "tok/s" else (3 if iv.headline.unit == "s" else 2)
                rel = iv.relative
                grid.add(
                    text(outcome.target.name),
                    text(run_load(outcome.result.workload, run.concurrency)),
                    text(iv.headline.label),
                    text(iv.headline.unit),
                    number(iv.mean, digits),
                    number(iv.half_width, digits),
                    number(None if rel is None else rel * 100, 1),
                    number(min(iv.values) if iv.values else None, digits),
                    number(max(iv.values) if iv.values else None, digits),
                )
    return grid


def run_repeats(
    times: int,
    once: Callable[[int], list[BenchOutcome]],
    *,
    csv_path: Path | None,
    json_path: Path | None,
    fmt: Format,
    console: Console,
    notes: Console,
) -> list[list[BenchOutcome]]:
    """Run `once` `times` times, saving each repeat, then print the interval table."""
    repeats: list[list[BenchOutcome]] = []
    for k in range(1, times + 1):
        outcomes = once(k)
        repeats.append(outcomes)
        path = repeat_path(json_path, k)
        for written in save_outcomes(outcomes, csv_path=csv_path, json_path=path):
            notes.print(f"repeat {k}: wrote {written}", soft_wrap=True, markup=False)
        _say_failures(k, outcomes, notes)
        if any(o.result and o.result.interrupted for o in outcomes):
            _interrupted(k, times, repeats, fmt, console, notes)
        if any(o.error for o in outcomes):
            break
    emit(interval_grid(repeats), fmt, console)
    return repeats


def _say_failures(k: int, outcomes: list[BenchOutcome], notes: Console) -> None:
    """What a single run says of its failures, for one repeat; and a repeat left out."""
    for outcome in outcomes:
        name = esc(outcome.target.name)
        if outcome.error:
            notes.print(f"[red]repeat {k}: {name}: not timed:[/red] {esc(outcome.error)}")
            continue
        result = outcome.result
        if result is None:
            continue
        for run in result.runs:
            for kind, count in run.summary.errors.items():
                notes.print(f"[red]repeat {k}: {name}: {count} failed: {esc(kind)}[/red]")
            first_error = next((m.error for m in run.requests if m.error), None)
            if first_error:
                notes.print(f"  first error: {esc(first_error)}", soft_wrap=True)
            if not measured(run.summary) and not result.interrupted:
                load = run_load(result.workload, run.concurrency)
                notes.print(
                    f"[yellow]repeat {k}: {name} {load}: no request succeeded, so this "
                    "repeat is left out of the means and intervals below[/yellow]",
                    soft_wrap=True,
                )


def _interrupted(
    k: int,
    times: int,
    repeats: list[list[BenchOutcome]],
    fmt: Format,
    console: Console,
    notes: Console,
) -> None:
    """Ctrl-C (or SIGTERM) in repeat k: the cut repeat is in no figure; exit 130."""
    finished = sum(
        len(run.requests) for o in repeats[-1] if o.result is not None for run in o.result.runs
    )
    whole = repeats[:-1]
    notes.print(
        f"[yellow]interrupted:[/yellow] repeat {k} of {times} was stopped (Ctrl-C or SIGTERM) "
        f"after {counted(finished, 'request')} finished; it is left out of the figures and the "
        "results CSV (its --json file keeps it)"
        + (
            f"; the table is over the {len(whole)} whole repeats"
            if len(whole) >= 2
            else "; fewer than 2 whole repeats, so there is no interval to give"
        ),
        soft_wrap=True,
    )
    if len(whole) >= 2:
        emit(interval_grid(whole), fmt, console)
    raise typer.Exit(EXIT_INTERRUPTED)
