"""`felab bench --repeat N`: the same workload N times, each figure with its 95 % interval.

A thin adapter over felab_core.engine.repeats: it runs the bench N times (each repeat saved as
an ordinary run: a CSV row, and FILE.rK.json with --json), then prints one table of intervals.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from felab.cli.bench_plan import repeat_path
from felab.cli.output import Column, Format, Grid, emit, number, text
from felab_core.engine.bench import BenchOutcome, save_outcomes
from felab_core.engine.measure import RunResult
from felab_core.engine.repeats import intervals


def _load(run: RunResult) -> str:
    if run.rate is not None:
        return f"{run.rate:g} req/s"
    return f"{run.concurrency} stream{'' if run.concurrency == 1 else 's'}"  # not "1 streams"


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
                    text(_load(run)),
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
        if any(o.error or (o.result and o.result.interrupted) for o in outcomes):
            break
    emit(interval_grid(repeats), fmt, console)
    return repeats
