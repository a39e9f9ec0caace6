"""What `felab bench`'s flags ask for, checked as a whole before anything runs.

Every flag that only means something beside another, every pair that contradicts, every
number out of range is refused here with a ValueError in words (the command turns it into
exit 2): a run that started would otherwise ignore a flag or fail minutes in.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from felab_core.engine.apis import Api
from felab_core.engine.client import ClientLimits
from felab_core.engine.metrics import SLO
from felab_core.engine.rate_search import SEARCH_CEILING
from felab_core.engine.results import check_destinations, default_csv
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.targets import Target, load_targets, resolve_target
from felab_core.engine.trace import load_trace, preset_name
from felab_core.engine.workloads import MAX_CONCURRENCY, PRESETS, Workload
from felab_core.settings import get_settings
from felab_core.text import comma_items, loose_number_problem

#: More client processes than any one machine's cores could use (the auto choice stays lower).
MAX_PROCESSES = 64


def _parse_concurrency(text: str) -> tuple[int, ...]:
    try:
        parts = comma_items(text, "1,4,16")
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        if not all(p.isascii() and p.isdigit() for p in parts if p):  # int() reads 2_0 as 20
            raise ValueError(text)
        values = tuple(int(p) for p in parts if p)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: use whole numbers separated by commas, e.g. 1,4,16"
        ) from None
    if not values:
        raise typer.BadParameter("give at least one value, e.g. 1 or 1,4,16")
    return values


def _parse_processes(text: str) -> int | None:
    """`auto` (None: chosen per run) or a whole number of client processes."""
    if text.strip().lower() == "auto":
        return None
    loose = loose_number_problem(text, int)  # int() reads 1_0 as 10 and ２ as 2
    if loose:
        raise typer.BadParameter(loose)
    try:
        n = int(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r}: use auto or a whole number, e.g. 2") from None
    if not 1 <= n <= MAX_PROCESSES:
        raise typer.BadParameter(f"{n}: use auto or 1 to {MAX_PROCESSES} processes")
    return n


def _partners_given(*pairs: tuple[str, object, str, object]) -> None:
    """Refuse a flag given without the flag it only makes sense with (it would be ignored)."""
    for flag, value, partner, partner_value in pairs:
        if value is not None and partner_value is None:
            raise ValueError(f"{flag} only applies with {partner}: add {partner}, or drop {flag}")


def plan_run(
    *,
    targets: list[str] | None,
    targets_file: Path | None,
    url: str | None,
    api: Api | None,
    model: str | None,
    kind: ServerKind | None,
    preset: str,
    concurrency: str | None,
    rate: float | None,
    burstiness: float | None,
    requests: int | None,
    duration: float | None,
    warmup: int | None,
    max_tokens: int | None,
    prompt_tokens: int | None,
    shared_prefix_tokens: int | None,
    seed: int | None,
    trace: Path | None,
    trace_speed: float | None,
    trace_block_size: int | None,
    tools: bool,
    ramp_up: float,
    ramp_down: float,
    stop_when_saturated: bool,
    sessions: int | None,
    turns: int | None,
    think_time: float | None,
    timeout: float,
    stall_timeout: float,
    slo: str | None,
    processes: str,
) -> tuple[list[Target], Workload, ClientLimits, SLO | None, int | None]:
    """The targets, the workload, the client's limits, the objective and the process count
    the flags ask for; ValueError (or TargetError) says what does not fit."""
    table = load_targets(targets_file or get_settings().targets_file)
    names: list[str | None] = list(targets or []) or [None]
    twice = sorted({n for n in names if n is not None and names.count(n) > 1})
    if twice:  # the second run would only repeat the first: --repeat says so on purpose
        raise ValueError(
            f"the target {', '.join(twice)} is named twice: name each once (--repeat times "
            "a target again)"
        )
    chosen: list[Target] = [
        resolve_target(n, targets=table, url=url, api=api, model=model, kind=kind) for n in names
    ]
    if trace is not None:
        for flag, value in (
            ("--prompt-tokens", prompt_tokens),
            ("--max-tokens", max_tokens),
            ("--shared-prefix-tokens", shared_prefix_tokens),
        ):
            if value is not None:
                raise ValueError(f"--trace sets each request's lengths from its lines: drop {flag}")
    _partners_given(
        ("--trace-speed", trace_speed, "--trace", trace),
        ("--trace-block-size", trace_block_size, "--trace", trace),
        ("--turns", turns, "--sessions", sessions),
        ("--think-time", think_time, "--sessions", sessions),
    )
    replay = (
        load_trace(
            trace,
            block_size=512 if trace_block_size is None else trace_block_size,
            speed=1.0 if trace_speed is None else trace_speed,
        )
        if trace
        else None
    )
    if replay is not None and requests is not None and requests > len(replay.requests):
        raise ValueError(
            f"-n {requests}: the trace holds {len(replay.requests)} "
            f"request{'' if len(replay.requests) == 1 else 's'}, "
            f"so the run would stop there; give -n {len(replay.requests)} or less, or leave "
            "-n out"
        )
    workload: Workload = PRESETS[preset].workload.with_overrides(
        concurrency=None if concurrency is None else _parse_concurrency(concurrency),
        rate=rate,
        burstiness=burstiness,
        requests=requests,
        duration_s=duration,
        warmup=warmup,
        max_tokens=max_tokens,
        prompt_tokens=prompt_tokens,
        shared_prefix_tokens=shared_prefix_tokens,
        seed=seed,
        trace=replay,
        tools=tools or None,
        ramp_up_s=ramp_up or None,
        ramp_down_s=ramp_down or None,
        stop_when_saturated=stop_when_saturated or None,
    )
    if (tools or workload.tools) and any(t.api is Api.OPENAI_COMPLETIONS for t in chosen):
        raise ValueError(  # the agent preset's tool call had been dropped without a word
            f"{'--tools' if tools else f'--preset {preset} (its tool call)'} needs a chat API "
            "(openai-chat or ollama), not completions"
        )
    if sessions is not None:
        workload = replace(
            workload,
            sessions=sessions,
            turns=4 if turns is None else turns,
            think_time_s=0.0 if think_time is None else think_time,
            preset=f"sessions {sessions}x{4 if turns is None else turns}",
            requests=None,
            concurrency=(min(max(1, sessions), MAX_CONCURRENCY),)
            if concurrency is None
            else workload.concurrency,
        )
    if replay is not None:
        workload = replace(
            workload,
            preset=preset_name(replay.name),
            requests=requests,  # the whole trace unless -n cuts it
            concurrency=workload.concurrency if concurrency is not None else (0,),
        )
    if rate is not None and concurrency is None:
        workload = replace(workload, concurrency=(0,))  # open loop, no cap on in-flight
    if duration is not None and requests is None:
        workload = replace(workload, requests=None)  # the clock ends the run
    workload.validate()
    if workload.sessions is not None:  # after the values: a bad one is named first
        why = "--sessions runs" if sessions is not None else f"--preset {preset} runs sessions:"
        for flag, given in (("-n/--requests", requests), ("--duration", duration)):
            if given is not None:  # the chat preset had dropped them without a word
                raise ValueError(
                    f"{why} each session's --turns to the end: {flag} would not apply; size "
                    "the run with --sessions and --turns"
                )
    limits = ClientLimits(total=timeout, stall=stall_timeout)
    limits.validate()
    try:
        objective = SLO.parse(slo) if slo is not None else None
    except ValueError as exc:
        raise ValueError(f"--slo: {exc}") from None
    client_processes = _parse_processes(processes)
    return chosen, workload, limits, objective, client_processes


def check_outputs(
    *,
    json_path: Path | None,
    csv_path: Path | None,
    no_csv: bool,
    trace: Path | None = None,
    targets_file: Path | None = None,
    repeat: int = 1,
) -> None:
    """Refuse, before the run, files it could not be saved to (minutes of timing not lost)."""
    for flag, given, own in (("--json", json_path, "json"), ("--csv", csv_path, "csv")):
        if given is not None and str(given) == "-":
            raise ValueError(
                f"{flag} - : felab writes a file there; for the table on stdout use -o {own}"
            )
    if no_csv and csv_path is not None:
        raise ValueError("--no-csv and --csv contradict each other: give one")
    inputs = (
        (trace, "trace (--trace)"),
        (targets_file, "targets file"),
        (_database_file(), "database felab keeps (FELAB_DATA_DIR or FELAB_DATABASE_URL)"),
    )
    csv_out = None if no_csv else (csv_path or default_csv())
    check_destinations(csv_out, json_path, inputs=inputs)
    for k in range(1, min(repeat, 100) + 1 if json_path is not None and repeat > 1 else 1):
        # each repeat's own record, FILE.rK.json: through a link it had replaced what the
        # link named (a results CSV, /etc/hostname)
        check_destinations(csv_out, repeat_path(json_path, k), inputs=inputs)
    for flag, given, own, other in (
        ("--json", json_path, "json", "csv"),
        ("--csv", csv_path, "csv", "json"),
    ):
        if given is not None and given.suffix.lower() == f".{other}":  # CSV text in x.json
            raise ValueError(
                f"{flag} {given}: {flag} writes {own.upper()}, and the name ends in .{other}; "
                f"name it .{own} (--{other} writes the {other.upper()} file)"
            )


def _database_file() -> Path | None:
    """The SQLite file of felab's database, even before it exists (a results file written there
    would make every later db command fail): read from the URL without SQLAlchemy, which a
    student's machine does not have."""
    url = get_settings().resolved_database_url()
    if not url.startswith("sqlite") or ":///" not in url:
        return None
    path = url.split(":///", 1)[1].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def check_search(
    chosen: list[Target],
    workload: Workload,
    *,
    json_path: Path | None,
    csv_path: Path | None,
    slo: str | None,
    repeat: int,
    requests: int | None,
    duration: float | None,
    concurrency: str | None,
    sessions: int | None = None,
    preset: str | None = None,
) -> None:
    """--find-max-rate runs its own probes: refuse the flags it would not apply, naming them."""
    if len(chosen) != 1:
        raise ValueError(
            f"--find-max-rate searches one target: name one of {', '.join(t.name for t in chosen)}"
        )
    if workload.trace is not None:
        raise ValueError(
            "--find-max-rate sets its own arrival rates with a synthetic workload: drop --trace"
        )
    if workload.sessions is not None:
        chat = PRESETS.get(preset or workload.preset or "")
        flags = [f"--preset {chat.name}"] if chat and chat.workload.sessions else []
        flags += ["--sessions"] if sessions is not None or not flags else []
        raise ValueError(
            "--find-max-rate sends single requests at a rate, not conversations: drop "
            + " and ".join(flags)
        )
    if workload.rate is not None and workload.rate > SEARCH_CEILING:  # exit 70 before
        raise ValueError(
            f"--find-max-rate starts at --rate and goes up to {SEARCH_CEILING:,.0f} req/s: give "
            f"--rate {SEARCH_CEILING:,.0f} or less (it was {workload.rate:,g})"
        )
    ignored = [
        flag
        for flag, given in (
            ("--json", json_path is not None),
            ("--csv", csv_path is not None),
            ("--slo", slo is not None),
            ("--repeat", repeat != 1),
            ("-n without --duration", requests is not None and duration is None),
            ("a -c list", concurrency is not None and len(workload.concurrency) > 1),
        )
        if given
    ]
    if ignored:
        why = " (the objective is the one it names)" if "--slo" in ignored else ""
        raise ValueError(
            f"--find-max-rate prints its own search, probe by probe: {', '.join(ignored)} "
            f"would not apply; drop {'them' if len(ignored) > 1 else 'it'}{why}"
        )


def repeat_path(json_path: Path | None, k: int) -> Path | None:
    """Where repeat `k` of `--repeat N --json FILE` is saved: FILE.rK.json."""
    if json_path is None:
        return None
    return json_path.with_name(f"{json_path.stem}.r{k}{json_path.suffix or '.json'}")
