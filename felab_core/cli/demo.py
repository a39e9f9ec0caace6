"""`felab demo`: the course's Day 2 on this machine, from nothing to the comparison table."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from felab_core.cli.bench import _print_details, comparison_table
from felab_core.engine.results import ResultsFileError, default_csv
from felab_core.lab.demo import DEMO_ENGINES, run_demo

console = Console()


def demo(
    quick: bool = typer.Option(
        False, "--quick", help="Fewer, shorter requests (3 x 64 tokens): CI's smoke run."
    ),
    engines: str = typer.Option(
        ",".join(DEMO_ENGINES), "--engines", help="Engines to serve and time, in order."
    ),
    csv_path: Path | None = typer.Option(
        None, "--csv", help="Results CSV to append rows to [default: results/01-latency.csv]."
    ),
    no_install: bool = typer.Option(
        False, "--no-install", help="Only use engines already installed; skip the others."
    ),
) -> None:
    """Day 2 on this machine: one tiny model on real llama.cpp and MLX, timed the same way.

    Serves felab's tiny model on each engine in turn, times it with the same benchmark service
    as `felab bench`, prints the Day 2 comparison table and appends the rows to the results CSV.
    Installs what is missing first (llama.cpp is built once from PyPI's sources, ~9 minutes on
    2 cores; MLX's CPU wheels take ~30 s), one server at a time, and leaves nothing running.
    A tiny model on a CPU measures the serving path, not a real model on a Mac: the point is
    the method, and that every engine is timed the same way.
    """
    chosen = tuple(e.strip() for e in engines.split(",") if e.strip())
    try:
        result = run_demo(
            engines=chosen,
            quick=quick,
            install=not no_install,
            csv_path=csv_path or default_csv(),
            log=lambda line: console.print(Text(line, style="dim"), soft_wrap=True),
        )
    except ResultsFileError as exc:
        console.print(f"[red]could not save results:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(comparison_table(result.outcomes))
    _print_details(result.outcomes)
    for engine, why in result.skipped.items():
        console.print(f"[yellow]{engine}: not timed:[/yellow] {why}")
    for path in result.written:
        console.print(f"wrote {path}")
    if not result.outcomes or any(o.error or o.failed_requests for o in result.outcomes):
        raise typer.Exit(1)
