"""`felab bench`, `felab targets` and `felab presets`: the timing engine from a terminal.

Long because `felab bench` has many options, each with help that teaches (workloads, traces,
sessions, analysis); the modes live apart (bench_search.py, bench_repeat.py), the checks of
the flags as a whole in bench_plan.py, and the engine in felab_core.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape as esc
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from felab.cli.bench_plan import check_outputs, check_search, plan_run
from felab.cli.output import (
    Cell,
    Column,
    Format,
    Grid,
    emit,
    format_option,
    number,
    print_table,
    text,
)
from felab.cli.stopping import sigterm_as_ctrl_c
from felab.cli.waiting import ProgressLines, SilenceNotice
from felab_core.engine.apis import Api
from felab_core.engine.bench import BenchOutcome, run_bench, save_outcomes
from felab_core.engine.client import MAX_LIMIT_S, MIN_LIMIT_S
from felab_core.engine.event_loop import run_sync
from felab_core.engine.loads import run_load
from felab_core.engine.measure import RunResult, TargetResult
from felab_core.engine.metrics import Stats
from felab_core.engine.results import (
    ResultsFileError,
    default_csv,
    short_model,
)
from felab_core.engine.server_kinds import ServerKind, kind_names
from felab_core.engine.targets import Target, TargetError, load_targets
from felab_core.engine.workloads import (
    MAX_BURSTINESS,
    MAX_DURATION_S,
    MIN_BURSTINESS,
    MIN_DURATION_S,
    PRESETS,
)
from felab_core.failures import EXIT_INTERRUPTED
from felab_core.redact import redact, url_without_credentials
from felab_core.settings import get_settings

EXIT_OK, EXIT_FAILED_REQUESTS, EXIT_USAGE, EXIT_NOT_TIMED = 0, 1, 2, 3

METRICS_HELP = """\
[bold]What the numbers mean[/bold] (N = output tokens; every time is on one monotonic clock):

[bold]TTFT[/bold]  time to first token: request sent -> first chunk with generated text (a role-only
      or empty first chunk is not a token). vLLM/AIPerf/guidellm call it TTFT too.
[bold]ITL[/bold]   inter-token latency: the gaps between successive content chunks.
[bold]TPOT[/bold]  time per output token = (last token - first token) / (N - n1), n1 = tokens
      in the first content chunk.
      vLLM's TPOT; AIPerf calls it ITL; guidellm's TPOT also counts the first token.
[bold]Writing speed[/bold]  1 / TPOT tokens/s: what one person sees once the reply has started.
      ITL, TPOT and writing speed are blank ('-') for an answer whose tokens came in one read
      or one burst (past 20,000 tok/s one stream): a buffer's timing, not the model's.
[bold]E2E[/bold]   request sent -> end of stream. Open loop (--rate) also reports both from the
      scheduled send, so time queued in the client is never hidden.
[bold]N[/bold]     the server's usage, else Ollama's eval_count, else counted chunks (token_source).

Exit codes: 0 all requests ok, 1 some failed, 2 bad usage, 3 a target could not be timed,
130 interrupted (Ctrl-C or SIGTERM once keeps what finished; twice stops at once).
"""

console = Console(highlight=False)  # a server's or a file's words are shown as written
err_console = Console(stderr=True, highlight=False)


#: Seconds without a finished request before the bench says it is still waiting.
QUIET_NOTICE_S = 30.0
#: Where no bar is drawn (not a terminal), a progress line at most this often.
PROGRESS_LINE_S = 30.0


def _fmt(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if value is None else f"{value * scale:,.{digits}f}"


COLUMNS = [
    Column("target_model", "server / model", table=True, data=False),
    Column("target", "server", table=False, md=True),
    Column("model", "model", table=False, md=True),
    Column("users", "users", numeric=True),
    Column("writing_tps_p50", "writing\ntok/s", numeric=True),
    Column("ttft_p50_ms", "TTFT\nms", numeric=True),
    Column("ttft_p95_ms", "TTFT p95\nms", numeric=True),
    Column("itl_p50_ms", "ITL\nms", numeric=True),
    Column("e2e_p50_s", "E2E\ns", numeric=True),
    Column("total_tps", "total\ntok/s", numeric=True),
    Column("server_tps_p50", "server\ntok/s", numeric=True),
    Column("ok", "ok", numeric=True),
    Column("failed", "failed", numeric=True, table=False),
]


def _p50(stats: Stats | None, scale: float = 1.0, digits: int = 1) -> Cell:
    return number(None if stats is None else stats.p50, digits, scale)


def comparison_grid(outcomes: list[BenchOutcome]) -> Grid:
    """The course's Day 2 table: one row per server and run, writing speed first."""
    grid = Grid(
        "felab bench: p50 unless noted",
        COLUMNS,
        caption="writing = 1/TPOT, one user's speed; total = all users; server = its own figure",
    )
    for outcome in outcomes:
        t = outcome.target
        if outcome.result is None:
            grid.add(
                text(t.name),
                text(t.name),
                text(None),
                text(None),
                Cell("not timed", None, "red"),
                *[text(None)] * 6,
                Cell("0", 0),
                text(None),
            )
            continue
        r = outcome.result
        model = short_model(r.model)
        for run in r.runs:
            s = run.summary
            users = (  # a rate or a trace sets the arrivals: its load in words, with -c's cap
                text(run_load(r.workload, run.concurrency))
                if r.workload.open_loop
                else Cell(str(run.concurrency), run.concurrency)
            )
            ok = (
                Cell(str(s.ok), s.ok)
                if not s.failed
                else Cell(f"{s.ok}/{s.ok + s.failed}", s.ok, "red")
            )
            grid.add(
                text(f"{t.name}\n{model}"),
                text(t.name),
                text(model),
                users,
                _p50(s.writing_tps),
                _p50(s.ttft_s, 1e3),
                number(None if s.ttft_s is None else s.ttft_s.p95, 1, 1e3),
                _p50(s.itl_s, 1e3, 2),
                _p50(s.e2e_s, 1.0, 2),
                number(s.output_tps),
                _p50(s.server_tps),
                ok,
                Cell(str(s.failed), s.failed),
            )
    return grid


def client_summary(run: RunResult) -> str:
    """One line of evidence that the client kept up."""
    c = run.client
    parts = [f"client check: event-loop lag p99 {_fmt(c.loop_lag_p99_ms, 1.0, 2)} ms"]
    if c.schedule_lag_p99_ms is not None:
        parts.append(f"send lateness p99 {_fmt(c.schedule_lag_p99_ms, 1.0, 2)} ms")
    parts.append(
        "arrivals stamped by the kernel" if c.kernel_stamps else "arrivals stamped on read"
    )
    return ", ".join(parts)


def _print_details(outcomes: list[BenchOutcome], out: Console) -> None:
    """Notes under the table, one line each however narrow the output (never hard-wrapped)."""

    def say(text: str) -> None:
        out.print(text, soft_wrap=True)

    def warn(text: str) -> None:
        err_console.print(text, soft_wrap=True)

    for outcome in outcomes:
        if outcome.error:
            warn(f"[red]{esc(outcome.target.name)}: not timed:[/red] {esc(outcome.error)}")
            continue
        r: TargetResult | None = outcome.result
        assert r is not None
        for note in r.notes:
            say(f"[yellow]{esc(r.target.name)}:[/yellow] {esc(note)}")
        for run in r.runs:
            s = run.summary
            load = run_load(r.workload, run.concurrency)  # as the table and compare say it
            for kind, count in s.errors.items():
                warn(f"[red]{esc(r.target.name)}: {count} failed: {esc(kind)}[/red]")
            first_error = next((m.error for m in run.requests if m.error), None)
            if first_error:
                warn(f"  first error: {esc(first_error)}")
            for w in run.client.warnings:
                say(f"[yellow]{esc(r.target.name)}: client check:[/yellow] {esc(w)}")
            if not run.client.warnings:
                say(f"[dim]{esc(r.target.name)} {load}: {client_summary(run)}[/dim]")
            for cold in s.cold_starts:
                say(
                    f"[yellow]{esc(r.target.name)}:[/yellow] request {cold['index']} was a cold "
                    f"start (TTFT {cold['ttft_s'] or 0:.2f} s); reported here, not in the figures"
                )
            if run.server_metrics:
                say(
                    f"{esc(r.target.name)} {load}: the server's /metrics: "
                    f"{run.server_metrics['explanation']}"
                )
            if s.cached_share is not None:
                say(
                    f"{esc(r.target.name)} {load}: prefix cache: "
                    f"{s.cached_share * 100:.0f}% of prompt tokens were cached (the server's count)"
                )
            if s.window is not None:
                win = s.window
                say(
                    f"{esc(r.target.name)} {load}: steady window {win['from_s']:g}-"
                    f"{win['to_s']:.1f} s: {win['kept']} requests in the figures, {win['dropped']} "
                    "sent in the ramp-up or still running in the ramp-down left out"
                    + (
                        ": nothing was measured (shorten --ramp-up/--ramp-down, or send for "
                        "longer with --duration)"
                        if win["kept"] == 0
                        else ""
                    )
                )
            for turn in s.per_turn:
                cached = turn["cached_share"]
                say(
                    f"{esc(r.target.name)} turn {turn['turn']}: TTFT p50 "
                    f"{_fmt(turn['ttft_p50_s'], 1e3, 1)} ms over {turn['requests']} requests, "
                    f"prompt {_fmt(turn['prompt_tokens_mean'], 1.0, 0)} tokens"
                    + ("" if cached is None else f", {cached * 100:.0f}% cached")
                )
            if s.goodput_rps is not None:
                say(
                    f"{esc(r.target.name)} {load}: goodput {s.goodput_rps:.2f} req/s "
                    f"({(s.goodput_fraction or 0) * 100:.0f}% of requests met {s.slo})"
                )


@sigterm_as_ctrl_c()  # `timeout`, `kill`, a CI limit: keep what finished, as Ctrl-C does
def bench(
    targets: list[str] = typer.Argument(
        None,
        help=f"Target names: {kind_names(targets=True)}, or your own from the targets "
        "file. Several are timed one after another and compared in one table.",
        show_default=False,
    ),
    url: str | None = typer.Option(
        None, "--url", help="Server base address http://HOST:PORT (a trailing /v1 is fine)."
    ),
    api: Api | None = typer.Option(None, "--api", help="Wire protocol; the path follows from it."),
    model: str | None = typer.Option(None, "--model", help="Model name to send."),
    kind: ServerKind | None = typer.Option(
        None, "--kind", help="With --url: which server this is, so felab can check it."
    ),
    preset: str = typer.Option(
        "day2", "--preset", help="Named workload (see `felab presets`); flags below override it."
    ),
    concurrency: str | None = typer.Option(
        None,
        "--concurrency",
        "-c",
        help="Users at once, 1 to 4,096; a list sweeps: 1,4,16 (one run each, at most 64).",
    ),
    rate: float | None = typer.Option(
        None,
        "--rate",
        help="Open loop: requests/s on a fixed schedule (0.01 to 100,000); -c then caps in-flight.",
    ),
    burstiness: float | None = typer.Option(
        None,
        "--burstiness",
        help=f"Open loop gaps: 1 = Poisson, <1 burstier, >1 steadier ({MIN_BURSTINESS:g} to "
        f"{MAX_BURSTINESS:,.0f}).",
    ),
    requests: int | None = typer.Option(
        None, "--requests", "-n", help="Requests per run, 1 to 1,000,000."
    ),
    duration: float | None = typer.Option(
        None,
        "--duration",
        help=f"Seconds per run, {MIN_DURATION_S:g} to {MAX_DURATION_S:,.0f} (instead of, or as "
        "well as, --requests).",
    ),
    warmup: int | None = typer.Option(
        None, "--warmup", help="Warm-up requests, not counted (0 to 1,000)."
    ),
    max_tokens: int | None = typer.Option(
        None,
        "--max-tokens",
        help="Output length, 1 to 262,144 tokens, forced where the server allows it.",
    ),
    prompt_tokens: int | None = typer.Option(
        None,
        "--prompt-tokens",
        help="Synthetic prompt of about N tokens, 1 to 262,144 (default: a fixed text).",
    ),
    shared_prefix_tokens: int | None = typer.Option(
        None,
        "--shared-prefix-tokens",
        help="Every prompt opens with the same P tokens (fewer than --prompt-tokens).",
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed for prompts and arrivals."),
    trace: Path | None = typer.Option(
        None,
        "--trace",
        help="Replay a Mooncake-style JSONL trace (timestamp ms, input_length, output_length, "
        "hash_ids): its arrival times, lengths and shared prompt blocks. -c caps in-flight.",
    ),
    trace_speed: float | None = typer.Option(
        None,
        "--trace-speed",
        help="With --trace: 2 sends it twice as fast (0.001-1000) (default: 1).",
    ),
    sessions: int | None = typer.Option(
        None,
        "--sessions",
        help="Multi-turn conversations: N of them, -c at a time (by default all at once, up to "
        "4,096: more wait their turn); "
        "each turn's prompt holds the whole history, so the prefix cache can pay off.",
    ),
    turns: int | None = typer.Option(
        None, "--turns", help="With --sessions: turns per session, 1-1000 (default: 4)."
    ),
    think_time: float | None = typer.Option(
        None,
        "--think-time",
        help="With --sessions: seconds a user pauses between an answer and the next turn "
        "(0-3600) (default: 0).",
    ),
    tools: bool = typer.Option(
        False,
        "--tools",
        help="An agentic turn: offer a get_weather function and require a call, so the answer "
        "streams as tool-call deltas (counted as generated tokens). Chat APIs only.",
    ),
    ramp_up: float = typer.Option(
        0.0,
        "--ramp-up",
        help="Seconds at the start of each run whose requests are sent but left out of the "
        "figures (the server filling up), for a steady-state window.",
    ),
    ramp_down: float = typer.Option(
        0.0,
        "--ramp-down",
        help="Seconds at the end of each run: requests still running then are left out too.",
    ),
    find_max_rate: str | None = typer.Option(
        None,
        "--find-max-rate",
        help="Search the highest request rate whose run meets an objective, e.g. "
        "ttft_p95=500ms,itl_p95=50ms: rates double from --rate (1 unless given), then bisect; "
        "each probe lasts --duration (10 s unless given).",
    ),
    repeat: int = typer.Option(
        1,
        "--repeat",
        help="Run the whole workload N times (1-100); from 2, print each figure's mean with its "
        "95 % interval over the repeats; each repeat is saved as a run (--json FILE.rK.json).",
    ),
    stop_when_saturated: bool = typer.Option(
        False,
        "--stop-when-saturated",
        help="Open loop: stop sending once the server falls behind (in 3 s, under half the "
        "requests sent finished and those in flight doubled); what was sent is measured.",
    ),
    trace_block_size: int | None = typer.Option(
        None,
        "--trace-block-size",
        help="With --trace: prompt tokens per hash_id (default: 512, as in Mooncake's traces).",
    ),
    slo: str | None = typer.Option(
        None,
        "--slo",
        help="Goodput objective, e.g. ttft=0.5,tpot=0.05 (seconds) or ttft=500ms,tpot=50ms.",
    ),
    timeout: float = typer.Option(
        600.0,
        "--timeout",
        help=f"Seconds one request may take ({MIN_LIMIT_S:g} to {MAX_LIMIT_S:,.0f}).",
    ),
    stall_timeout: float = typer.Option(
        60.0,
        "--stall-timeout",
        help=f"Seconds of silence mid-stream before a request fails ({MIN_LIMIT_S:g} to "
        f"{MAX_LIMIT_S:,.0f}).",
    ),
    csv_path: Path | None = typer.Option(
        None, "--csv", help="Results CSV to append a row to (default: results/01-latency.csv)."
    ),
    no_csv: bool = typer.Option(False, "--no-csv", help="Do not write the CSV row."),
    json_path: Path | None = typer.Option(
        None, "--json", help="Write the whole record (schema felab.bench/1) to this file."
    ),
    targets_file: Path | None = typer.Option(
        None, "--targets-file", help="Targets TOML (default: $FELAB_TARGETS_FILE)."
    ),
    no_check: bool = typer.Option(
        False, "--no-check", help="Skip checking which server answers (not recommended)."
    ),
    processes: str = typer.Option(
        "auto",
        "--processes",
        help="Client processes per run (1-64), each with its own event loop, following one "
        "schedule; auto adds them when the warm-up says one process (~10,000 chunks/s) cannot "
        "keep up.",
    ),
    fmt: Format = format_option(),
) -> None:
    """Time LLM servers: TTFT, ITL, TPOT, writing speed and E2E, at chosen concurrency or rate.

    [bold]Examples[/bold]

      felab bench mlx                              (the Day 2 run on MLX)
      felab bench ollama llamacpp mlx              (the Day 2 comparison table)
      felab bench --url http://127.0.0.1:8080 --api openai-chat --model m
      felab bench vllm -c 1,4,16 --prompt-tokens 512 --max-tokens 128
      felab bench vllm --rate 8 --duration 60 -c 64 --slo ttft=0.5,tpot=0.05
      felab bench vllm --trace mooncake.jsonl --trace-speed 2  (replay a recorded day)
      felab bench llamacpp --sessions 8 --turns 5 --think-time 2  (multi-turn chat)
      felab bench ollama llamacpp mlx -o md        (a GitHub table to paste; csv, json too)
    """
    if preset not in PRESETS:
        err_console.print(
            f"[red]error:[/red] unknown preset {esc(repr(preset))}: choose from "
            f"{', '.join(PRESETS)}"
        )
        raise typer.Exit(EXIT_USAGE)
    try:
        chosen, workload, limits, objective, client_processes = plan_run(
            targets=targets,
            targets_file=targets_file,
            url=url,
            api=api,
            model=model,
            kind=kind,
            preset=preset,
            concurrency=concurrency,
            rate=rate,
            burstiness=burstiness,
            requests=requests,
            duration=duration,
            warmup=warmup,
            max_tokens=max_tokens,
            prompt_tokens=prompt_tokens,
            shared_prefix_tokens=shared_prefix_tokens,
            seed=seed,
            trace=trace,
            trace_speed=trace_speed,
            trace_block_size=trace_block_size,
            tools=tools,
            ramp_up=ramp_up,
            ramp_down=ramp_down,
            stop_when_saturated=stop_when_saturated,
            sessions=sessions,
            turns=turns,
            think_time=think_time,
            timeout=timeout,
            stall_timeout=stall_timeout,
            slo=slo,
            processes=processes,
        )
        check_outputs(
            json_path=json_path,
            csv_path=csv_path,
            no_csv=no_csv,
            trace=trace,
            targets_file=targets_file or get_settings().targets_file,
            repeat=repeat,
        )
    except (TargetError, ValueError, ResultsFileError) as exc:
        err_console.print(f"[red]error:[/red] {esc(redact(str(exc)))}")
        raise typer.Exit(EXIT_USAGE) from None
    if len(chosen) > 1 and url is not None:
        err_console.print("[red]error:[/red] --url applies to one target; name only one")
        raise typer.Exit(EXIT_USAGE)

    if not 1 <= repeat <= 100:
        err_console.print("[red]error:[/red] --repeat must be 1-100")
        raise typer.Exit(EXIT_USAGE)
    if find_max_rate is not None:
        from felab.cli.bench_search import search_rate
        from felab_core.engine.rate_search import parse_objective

        try:
            try:
                bounds = parse_objective(find_max_rate)
            except ValueError as exc:
                raise ValueError(f"--find-max-rate: {exc}") from None
            check_search(
                chosen,
                workload,
                json_path=json_path,
                csv_path=csv_path,
                slo=slo,
                repeat=repeat,
                requests=requests,
                duration=duration,
                concurrency=concurrency,
                sessions=sessions,
                preset=preset,
            )
        except ValueError as exc:
            err_console.print(f"[red]error:[/red] {esc(redact(str(exc)))}")
            raise typer.Exit(EXIT_USAGE) from None
        probe_workload = replace(
            workload, requests=None if duration is None else requests, duration_s=duration or 10.0
        )
        search_rate(
            chosen[0],
            probe_workload,
            bounds,
            start=rate or 1.0,
            limits=limits,
            check_server=not no_check,
            fmt=fmt,
            console=console,
        )
        return

    replay = workload.trace
    if replay is not None and replay.span_s > QUIET_NOTICE_S:  # a 29-minute replay said nothing
        err_console.print(
            f"[dim]replaying {len(replay.requests):,} requests over {replay.span_s:,.0f} s (the "
            f"trace's times at --trace-speed {replay.speed:g}): it takes that long; Ctrl-C stops "
            "and keeps what finished[/dim]"
        )

    def quiet_for(seconds: float) -> None:
        # The schedule's own gap, not a silent server: held to the notice's threshold, not to
        # the silence measured, which a busy machine's late watcher stretches past the gap.
        if workload.quiet_gap_s() >= QUIET_NOTICE_S:
            err_console.print(
                f"[yellow]waiting:[/yellow] no request has finished in {seconds:.0f} s; the "
                f"schedule leaves gaps of up to {workload.quiet_gap_s():,.0f} s between sends "
                "(--rate or the trace's times), so felab may be waiting for the next one's time. "
                "Ctrl-C stops."
            )
            return
        # A silent server (no headers, or a stream that stopped) meets --stall-timeout first
        # (httpx's read timeout); --timeout caps the whole request, pings and all.
        limit = (
            f"after {stall_timeout:g} s of silence (--stall-timeout) or {timeout:g} s in all "
            "(--timeout)"
            if stall_timeout < timeout
            else f"at --timeout ({timeout:g} s)"
        )
        err_console.print(
            f"[yellow]waiting:[/yellow] no request has finished in {seconds:.0f} s. A server "
            "loading its model, or writing long answers, can take this long; a request is given "
            f"up {limit}, and the target with it when the warm-up gets no token"
            + (" (without --no-check, felab asks it first)" if no_check else "")
            + ". Ctrl-C stops."
        )

    with (
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        ) as bar,
        SilenceNotice(QUIET_NOTICE_S, quiet_for) as silence,
    ):
        tasks: dict[str, TaskID] = {}
        lines = (
            None
            if err_console.is_terminal
            else ProgressLines(
                PROGRESS_LINE_S, lambda line: err_console.print(line, markup=False, style="dim")
            )
        )

        def progress(target: Target, label: str, done: int, total: int | None) -> None:
            silence.poke()
            key = f"{target.name} {label}"
            if key not in tasks:  # the description is markup: a name's '[/y]' had crashed it
                tasks[key] = bar.add_task(esc(key), total=total)
            bar.update(tasks[key], completed=done, total=total)
            if lines is not None:
                lines.update(key, done, total)

        def once(k: int = 0) -> list[BenchOutcome]:
            return run_sync(
                run_bench(
                    chosen,
                    workload,
                    slo=objective,
                    limits=limits,
                    progress=progress,
                    check_server=not no_check,
                    processes=client_processes,
                )
            )

        if repeat > 1:
            from felab.cli.bench_repeat import run_repeats

            notes = console if fmt is Format.table else err_console
            repeats = run_repeats(
                repeat,
                once,
                csv_path=None if no_csv else (csv_path or default_csv()),
                json_path=json_path,
                fmt=fmt,
                console=console,
                notes=notes,
            )
            if any(o.error or o.timed_nothing for rep in repeats for o in rep):
                raise typer.Exit(EXIT_NOT_TIMED)
            if any(o.failed_requests for rep in repeats for o in rep):
                raise typer.Exit(EXIT_FAILED_REQUESTS)
            return
        outcomes = once()
    # With md, csv or json, stdout holds the table alone: notes and file names go to stderr.
    notes = console if fmt is Format.table else err_console
    if not all(o.error for o in outcomes):  # a table of nothing but "not timed" says nothing
        emit(comparison_grid(outcomes), fmt, console)
    _print_details(outcomes, notes)
    try:
        written = save_outcomes(
            outcomes, csv_path=None if no_csv else (csv_path or default_csv()), json_path=json_path
        )
    except (ResultsFileError, OSError) as exc:
        err_console.print(f"[red]could not save results:[/red] {esc(redact(str(exc)))}")
        raise typer.Exit(EXIT_FAILED_REQUESTS) from None
    for path in written:
        notes.print(f"wrote {path}", markup=False)  # a path's '[/x]' is no markup
    if any(o.result is not None and o.result.interrupted for o in outcomes):
        err_console.print(
            "[yellow]interrupted:[/yellow] the table shows what finished; it is not in the "
            "results CSV (a short run does not compare with a full one). --json keeps it."
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    if any(o.error or o.timed_nothing for o in outcomes):
        if all(o.ramps_took_all for o in outcomes if o.error or o.timed_nothing):
            raise typer.Exit(EXIT_USAGE)  # the flags left nothing to measure; the note says so
        raise typer.Exit(EXIT_NOT_TIMED)
    if any(o.result is not None and o.result.partial for o in outcomes):
        err_console.print(
            "[red]partial:[/red] a client process was lost, so the figures are a smaller sample "
            "than the run; they are not in the results CSV. Run again (fewer --processes if "
            "the machine ran out of memory)."
        )
        raise typer.Exit(EXIT_FAILED_REQUESTS)
    if any(o.failed_requests for o in outcomes):
        raise typer.Exit(EXIT_FAILED_REQUESTS)


def targets_cmd(
    targets_file: Path | None = typer.Option(
        None, "--targets-file", help="Targets TOML (default: $FELAB_TARGETS_FILE)."
    ),
) -> None:
    """List the servers felab knows by name: built-in defaults plus your targets file."""
    try:
        table_data = load_targets(targets_file or get_settings().targets_file)
    except TargetError as exc:
        err_console.print(f"[red]error:[/red] {esc(redact(str(exc)))}")
        raise typer.Exit(EXIT_USAGE) from None
    table = Table(title="felab targets")
    for col in ("name", "server", "url", "api", "model", "note"):
        table.add_column(col, overflow="fold")
    for t in table_data.values():
        table.add_row(  # names and notes as written: `[/]` or `[link=...]` is text, not markup
            esc(t.name),
            t.kind.label,
            esc(url_without_credentials(t.url)),
            t.api.value,
            esc(t.model or "(server default)"),
            esc(t.note or ""),
        )
    print_table(console, table)


def presets_cmd() -> None:
    """List the named workloads; a preset fixes every knob so two students' rows compare."""
    table = Table(title="felab presets")
    for col in ("name", "users", "requests", "warm-up", "max tokens", "prompt", "what it is"):
        table.add_column(col, overflow="fold")
    for p in PRESETS.values():
        w = p.workload
        prompt = "fixed text" if w.prompt_tokens is None else f"~{w.prompt_tokens} tokens"
        table.add_row(
            p.name,
            ",".join(map(str, w.concurrency)),
            f"{w.sessions}x{w.turns} turns" if w.sessions is not None else str(w.requests),
            str(w.warmup),
            str(w.max_tokens),
            prompt,
            p.summary,
        )
    print_table(console, table)


bench.__doc__ = (bench.__doc__ or "") + "\n\n" + METRICS_HELP
