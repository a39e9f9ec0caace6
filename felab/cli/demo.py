"""`felab demo`: the course's Day 2 on this machine, from nothing to the comparison table."""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape as esc
from rich.panel import Panel
from rich.text import Text

from felab.cli.bench import _print_details, comparison_grid
from felab.cli.folders import folder_parser
from felab.cli.output import Format, emit
from felab.fleet_demo import FleetDemoError, FleetDemoResult, run_fleet_demo
from felab_core.engine.results import ResultsFileError, default_csv
from felab_core.errors import ServiceError
from felab_core.failures import EXIT_INTERRUPTED
from felab_core.lab.demo import DEMO_ENGINES, run_demo
from felab_core.lab.engines import ENGINES
from felab_core.settings import get_settings

console = Console()


def demo(
    quick: bool = typer.Option(
        False,
        "--quick",
        help="Fewer, shorter requests (3 x 64 tokens; the fleet job runs the quick preset): "
        "CI's smoke run.",
    ),
    engines: str = typer.Option(
        ",".join(DEMO_ENGINES), "--engines", help="Engines to serve and time, in order."
    ),
    csv_path: Path | None = typer.Option(
        None,
        "--csv",
        help="Results CSV to append rows to (default: results/01-latency.csv); the chart goes "
        "beside it.",
    ),
    no_install: bool = typer.Option(
        False, "--no-install", help="Only use engines already installed; skip the others."
    ),
    fleet: bool = typer.Option(
        True,
        "--fleet/--no-fleet",
        help="Also run a job through the worker fleet (embedded broker, real worker processes).",
    ),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help="Keep the fleet half's SQLite database, broker and logs here (default: a temporary "
        "folder, removed at the end).",
        parser=folder_parser("--data-dir demo-data"),
        metavar="DIR",
    ),
) -> None:
    """Day 2 on this machine: one tiny model on real llama.cpp and MLX, timed the same way.

    Serves felab's tiny model on each engine in turn, times it with the same benchmark service
    as `felab bench`, prints the Day 2 comparison table and appends the rows to the results CSV.
    Installs what is missing first (llama.cpp is built once from PyPI's sources, ~9 minutes on
    2 cores; MLX's CPU wheels take ~30 s), one server at a time, and leaves nothing running.
    A tiny model on a CPU measures the serving path, not a real model on a Mac: the point is
    the method, and that every engine is timed the same way.

    Then (unless --no-fleet), while llama.cpp still runs, the whole chat path on embedded
    defaults: SQLite, the embedded broker, one `felab worker ingest` and one `felab worker
    start` process, the worker paired, a benchmark queued with the service call /bench makes,
    the result printed as the bot posts it, its chart and CSV row written to results/, and
    today's drill cards. No Discord token needed; every process it starts is stopped, also on
    Ctrl-C.
    """
    started = time.monotonic()
    chosen = tuple(e.strip() for e in engines.split(",") if e.strip())
    unknown = [e for e in chosen if e not in ENGINES]
    if not chosen or unknown:
        raise typer.BadParameter(
            f"{', '.join(unknown) or 'no engine'}: choose from {', '.join(ENGINES)}",
            param_hint="--engines",
        )
    csv = csv_path or default_csv()
    log = lambda line: console.print(Text(line, style="dim"), soft_wrap=True)  # noqa: E731
    fleet_out: list[FleetDemoResult] = []
    fleet_errors: list[str] = []

    def run_fleet(llama_url: str) -> None:
        console.print("[bold]The worker fleet on embedded defaults[/bold]")
        with tempfile.TemporaryDirectory(prefix="felab-demo-") as tmp:
            try:
                fleet_out.append(
                    run_fleet_demo(
                        llama_url=llama_url,
                        data_dir=data_dir or Path(tmp),
                        results_dir=csv.parent,
                        csv_path=csv,
                        content_dir=get_settings().content_dir,
                        quick=quick,
                        log=log,
                    )
                )
            except (FleetDemoError, ServiceError) as exc:
                fleet_errors.append(str(exc))

    def on_term(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt  # a SIGTERM (a CI timeout, `kill`) cleans up as Ctrl-C does

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        result = run_demo(
            engines=chosen,
            quick=quick,
            install=not no_install,
            csv_path=csv,
            log=log,
            with_llamacpp=run_fleet if fleet else None,
        )
    except ResultsFileError as exc:
        console.print(f"[red]could not save results:[/red] {esc(str(exc))}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        console.print(
            "[yellow]interrupted: every server and worker the demo started is stopped[/yellow]"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    emit(comparison_grid(result.outcomes), Format.table, console)
    _print_details(result.outcomes, console)
    for engine, why in result.skipped.items():
        console.print(f"[yellow]{esc(engine)}: not timed:[/yellow] {esc(why)}")
    for path in result.written:
        console.print(f"wrote {path}")
    failed = not result.outcomes or any(o.error or o.failed_requests for o in result.outcomes)
    if fleet:
        if "llamacpp" not in chosen or "llamacpp" in result.skipped:
            fleet_errors.append("the fleet half needs llama.cpp, which was not served")
        for fo in fleet_out:
            _print_fleet(fo)
        for why in fleet_errors:
            console.print(f"[red]worker fleet: {esc(why)}[/red]")
        failed = (
            failed
            or bool(fleet_errors)
            or any(fo.post is None or fo.post.status != "done" for fo in fleet_out)
        )
    console.print(f"[dim]demo took {time.monotonic() - started:.0f} s[/dim]")
    if failed:
        raise typer.Exit(1)


def _print_fleet(fo: FleetDemoResult) -> None:
    post = fo.post
    if post is not None:
        console.print(Panel(Text(post.text), title="the bot would post", title_align="left"))
    if fo.chart is not None:
        console.print(f"wrote {fo.chart} (the chart attached to the post)")
    if fo.csv is not None:
        console.print(f"appended the job's row to {fo.csv}")
    for step, secs in fo.seconds.items():
        console.print(f"[dim]{step}: {secs:.1f} s[/dim]")
    cards = fo.cards
    if cards is None:
        return
    console.print(Text(cards.plan, style="bold"))
    label = {"new": "new today", "review": "review", "catch-up": "catch-up"}
    for kind, view in cards.cards:
        console.print(
            Panel(
                Text(view.question),
                title=Text(f"Question ({label.get(kind, kind)})"),
                title_align="left",
            )
        )
    if cards.cards:
        console.print("Drill them with `felab drill` (answer out loud, reveal, rate yourself).")
