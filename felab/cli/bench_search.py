"""`felab bench --find-max-rate OBJECTIVE`: the highest rate within a latency objective.

A thin adapter over felab_core.engine.rate_search: each probe is an ordinary open-loop run of
the chosen workload at one rate, printed as it finishes, then the table of every probe.
"""

from __future__ import annotations

from dataclasses import replace

import typer
from rich.console import Console
from rich.markup import escape as esc

from felab.cli.output import Column, Format, Grid, emit, number, text
from felab_core.engine.client import ClientLimits
from felab_core.engine.event_loop import run_sync
from felab_core.engine.metrics import RunSummary, Stats
from felab_core.engine.probe import IdentityError
from felab_core.engine.rate_search import (
    Bound,
    Probe,
    ProbeInterrupted,
    ProbeUnmeasurable,
    SearchResult,
    find_max_rate,
    finished_rate,
    per_token_unreadable,
)
from felab_core.engine.runner import bench_target
from felab_core.engine.targets import Target
from felab_core.engine.workloads import Workload
from felab_core.failures import EXIT_INTERRUPTED

EXIT_NOT_FOUND = 4


def _ms(stats: Stats | None, which: str) -> float | None:
    return None if stats is None else getattr(stats, which) * 1e3


def probes_grid(result: SearchResult, bounds: tuple[Bound, ...]) -> Grid:
    """Every probe: its rate, what it finished, the bounded figures, and why it missed."""
    grid = Grid(
        "felab bench --find-max-rate: " + ", ".join(map(str, bounds)),
        [
            Column("rate", "asked\nreq/s", numeric=True),
            Column("finished_rps", "finished\nreq/s", numeric=True),
            Column("ok", "ok", numeric=True),
            Column("ttft_p95_ms", "TTFT p95\nms", numeric=True),
            Column("itl_p95_ms", "ITL p95\nms", numeric=True),
            Column("verdict", "verdict"),
        ],
        caption="passed: every bound held, <= 1 % failed, >= 90 % of the asked rate finished",
    )
    for p in sorted(result.probes, key=lambda p: p.rate):
        s = p.summary
        grid.add(
            number(p.rate, 2),
            number(finished_rate(p.rate, s), 2),
            number(s.ok, 0),
            number(_ms(s.ttft_s, "p95"), 1),
            number(_ms(s.itl_s, "p95"), 2),
            text("passed" if p.passed else "; ".join(p.misses), None if p.passed else "red"),
        )
    return grid


def search_rate(
    target: Target,
    workload: Workload,
    bounds: tuple[Bound, ...],
    *,
    start: float,
    limits: ClientLimits,
    check_server: bool,
    fmt: Format,
    console: Console,
) -> None:
    """Run the search on one target, print each probe as it ends, then the table and answer."""
    notes = console if fmt is Format.table else Console(stderr=True, highlight=False)
    cap = workload.concurrency if workload.concurrency != (1,) else (0,)

    first_errors: dict[float, str | None] = {}

    async def run_at(rate: float) -> RunSummary:
        at = replace(
            workload,
            rate=rate,
            concurrency=cap[:1],
            preset=f"max-rate {rate:g}",
            stop_when_saturated=True,  # a probe past the knee ends early instead of queueing
        )
        result = await bench_target(target, at, limits=limits, check_server=check_server)
        if result.interrupted or not result.runs:  # a cut probe is no evidence about its rate
            raise ProbeInterrupted(rate)
        run = result.runs[0]
        first_errors[rate] = next((m.error for m in run.requests if m.error), None)
        if unreadable := per_token_unreadable(bounds, run.requests):
            raise ProbeUnmeasurable(rate, run.summary, unreadable)
        return run.summary

    done: list[Probe] = []

    def said(p: Probe) -> None:
        done.append(p)
        verdict = "passed" if p.passed else "missed: " + "; ".join(p.misses)
        notes.print(f"probe {p.rate:g} req/s: {verdict}", soft_wrap=True)

    try:
        result = run_sync(find_max_rate(run_at, bounds, start=start, on_probe=said))
    except IdentityError as exc:
        notes.print(f"[red]{esc(target.name)}: not timed:[/red] {esc(str(exc))}", soft_wrap=True)
        raise typer.Exit(3) from None
    except KeyboardInterrupt:  # stopped between probes (while felab asked the server)
        result = SearchResult(None, done, interrupted_at=0.0)
    if result.interrupted_at is not None:
        _interrupted(result, bounds, fmt, console, notes)
    emit(probes_grid(result, bounds), fmt, console)
    if result.unmeasurable is not None:
        notes.print(
            f"[red]{esc(target.name)}: no rate found:[/red] {esc(result.unmeasurable)}; no rate "
            "changes that: bound ttft or e2e instead, or time the server directly (not through "
            "a buffering proxy)",
            soft_wrap=True,
        )
        raise typer.Exit(2)
    if result.failing is not None:
        failing = result.failing
        notes.print(
            f"[red]{esc(target.name)}: every request failed at {failing.rate:g} req/s[/red], so "
            "the search stopped (a server that answers none is not one to find a rate for): "
            f"first error: {esc(first_errors.get(failing.rate) or 'none given')}",
            soft_wrap=True,
        )
        raise typer.Exit(3)
    if result.best is None:
        notes.print(
            f"[red]no rate down to {min(p.rate for p in result.probes):g} req/s met "
            f"{', '.join(map(str, bounds))}[/red]: loosen the objective or check the server",
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_NOT_FOUND)
    best = result.best
    more = " (the search's ceiling: every probe passed)" if result.capped else ""
    finished = finished_rate(best.rate, best.summary)
    notes.print(
        f"[bold]{esc(target.name)}: highest rate within {', '.join(map(str, bounds))}: "
        f"{best.rate:.3g} req/s[/bold]{more} (it finished {finished:.3g} req/s)",
        soft_wrap=True,
    )


def _interrupted(
    result: SearchResult, bounds: tuple[Bound, ...], fmt: Format, console: Console, notes: Console
) -> None:
    """A search the user stopped: the probes that finished, and no verdict (exit 130)."""
    if result.probes:
        emit(probes_grid(result, bounds), fmt, console)
    at = f" during the probe at {result.interrupted_at:g} req/s" if result.interrupted_at else ""
    finished = len(result.probes)
    notes.print(
        f"[yellow]interrupted{at}:[/yellow] the search stopped (Ctrl-C or SIGTERM) after "
        f"{finished} finished probe{'' if finished == 1 else 's'}"
        + (" (the table)" if finished else "")
        + "; a search cut short gives no answer: run it again and let it end.",
        soft_wrap=True,
    )
    raise typer.Exit(EXIT_INTERRUPTED)
