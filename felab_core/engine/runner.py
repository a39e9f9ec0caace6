"""Runs a workload against one target: its identity and model, the warm-up, then one run per
concurrency value (measure.py measures each, in this process or in several), the server's own
figures around each run, and the notes a reader needs.
"""

from __future__ import annotations

import asyncio
import itertools
import platform
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from felab_core.engine.apis import Api
from felab_core.engine.box import box_note, read_box
from felab_core.engine.client import ClientLimits, Lanes
from felab_core.engine.counter_fit import RunFit, past_the_run
from felab_core.engine.measure import (
    RunResult,
    TargetResult,
    _run_label,
    _Sender,
    _stop_cancelling,
    client_check,
    measure_run,
    steady_window,
)
from felab_core.engine.metrics import (
    SLO,
    RequestMetrics,
    RunSummary,
    loaded_model,
    one_read_note,
    past_length_note,
    request_metrics,
    summarize,
)
from felab_core.engine.probe import IdentityError, ServerIdentity, check_identity, identify
from felab_core.engine.request_errors import wrong_api_note
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.shards import Shard, check_on_time
from felab_core.engine.targets import Target
from felab_core.engine.timeline import RequestTimeline
from felab_core.engine.token_counts import speed_disagreement_note
from felab_core.engine.trace import TracePrompts
from felab_core.engine.workloads import (
    Workload,
)
from felab_core.redact import add_if_secret, add_url_secrets, redact, url_without_credentials
from felab_core.sizing.errors import SizingError
from felab_core.sizing.metrics_scrape import ServerRates, Snapshot, diff, scrape


def resolve_model(target: Target, identity: ServerIdentity | None) -> str | None:
    """The model name to send: the target's, else the one the server lists.

    MLX and llama.cpp accept a request with no model (MLX sends any unknown name to the hub);
    vLLM, SGLang and Ollama need one.
    """
    if target.model:
        return target.model
    if not target.kind.traits.needs_model and target.kind is not ServerKind.OPENAI:
        return None
    if identity and identity.models:
        return identity.models[0]
    return None


def _same_model(a: str, b: str) -> bool:
    """One id either way: case aside, or a path and its file name (`/models/q.gguf`, q.gguf)."""
    a, b = a.casefold(), b.casefold()
    return a == b or a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]


def served_instead(target: Target, identity: ServerIdentity | None) -> tuple[str, str] | None:
    """(the model the server serves, a note) when --model names one it does not.

    llama-server answers with the one model it loaded whatever a request names, so a row filed
    under --model would give a 0.5B model's speed a 70B name: the server's own id is kept.
    """
    if not (target.model and identity and target.kind.traits.ignores_model_name):
        return None
    if len(identity.models) != 1 or _same_model(identity.models[0], target.model):
        return None
    served = identity.models[0]
    return served, (
        f"{target.kind.label} answers with the one model it loaded, whatever a request names: "
        f"its /v1/models lists {served!r}, not the model given ({target.model!r}): the "
        f"figures are filed under {served!r}, the model that answered. To have them named "
        "otherwise, start llama-server with --alias NAME"
    )


#: Said when --model looks like a key or password: it is sent as given, and shown masked.
SECRET_MODEL_NOTE = (
    "the model name given looks like a key or password (sk-..., hf_...): it was sent to the "
    "server as given, and is masked (***) in the table, the results CSV and the record; was "
    "a key pasted as --model? give the model's name (the server's /v1/models lists it)"
)


def _not_listed(target: Target, identity: ServerIdentity | None) -> str | None:
    """What a run says when --model names a model the server does not list (twenty-first
    sweep A15: `--model other` was stored without a word beside a server listing only m)."""
    if not (target.model and identity and identity.models):
        return None
    given = target.model.removesuffix(":latest")  # Ollama's name for the tag left out
    if any(_same_model(m.removesuffix(":latest"), given) for m in identity.models):
        return None
    listed = ", ".join(repr(m) for m in identity.models[:5])
    more = ", ..." if len(identity.models) > 5 else ""
    return (
        f"the server does not list the model given ({target.model!r}): its /v1/models lists "
        f"{listed}{more}; the figures are filed under {target.model!r} as asked, but may be "
        "another model's: check --model"
    )


async def bench_target(
    target: Target,
    workload: Workload,
    *,
    slo: SLO | None = None,
    limits: ClientLimits | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
    check_server: bool = True,
    processes: int | None = 1,
    shard: Shard | None = None,
) -> TargetResult:
    """Identify the server, warm it up, then one run per concurrency value.

    `processes` > 1 spreads each run over that many client processes following one schedule
    (engine/processes.py); None chooses from the warm-up's chunk rate and the free cores.
    `shard` makes this machine send one slice of a run spread over several machines, from the
    start they share (one process here; LateStart when the start has passed).
    """
    workload.validate()
    add_url_secrets(target.url)  # however the target was made: a server may repeat them
    limits = limits or ClientLimits()
    notes: list[str] = []
    if add_if_secret(target.model):  # sweep 22 a2 A2-13: a key pasted as --model
        notes.append(SECRET_MODEL_NOTE)
    if target.note:
        notes.append(target.note)
    if workload.trace is not None:
        notes += [n for n in (workload.trace.order_note, workload.trace.unit_note) if n]
    identity: ServerIdentity | None = None
    if check_server:
        identity = await identify(target.url)
        note = check_identity(target, identity)
        if note:
            notes.append(note)
    model = resolve_model(target, identity)
    instead = served_instead(target, identity)
    if instead is not None:
        model, said = instead
        notes.append(said)
    elif unlisted := _not_listed(target, identity):
        notes.append(unlisted)
    if target.kind.traits.needs_model and not model:
        notes.append("no model name known: set one with --model or in the targets file")
    if not target.model and model and identity and len(identity.models) > 1:
        listed = ", ".join(identity.models[:5]) + (", ..." if len(identity.models) > 5 else "")
        notes.append(
            f"the server lists {len(identity.models)} models ({listed}): timed {model}, the "
            "first; choose with --model"
        )
    # To the millisecond: it tells one run from another in a results CSV, and two runs of
    # `--repeat` on a fast server began in one second (their rows read as one run, edited).
    started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    is_ollama = target.api is Api.OLLAMA
    prompts = workload.prompt_plan().prompts()
    trace_prompts = TracePrompts(workload.trace, workload.seed) if workload.trace else None

    warm: list[RequestMetrics] = []
    last_warm: RequestTimeline | None = None
    interrupted = False
    if workload.warmup:
        async with Lanes(limits) as lanes:
            sender = _Sender(lanes, target, model, workload, limits, prompts)
            client = lanes.acquire()
            for i in range(workload.warmup):
                tl = RequestTimeline(index=-1 - i, warmup=True)
                try:
                    await sender.send(tl, client)
                except asyncio.CancelledError:
                    _stop_cancelling()
                    interrupted = True
                    notes.append("interrupted during warm-up: nothing was measured")
                    break
                warm.append(request_metrics(tl, api_is_ollama=is_ollama))
                last_warm = tl
                if progress:
                    progress("warm-up", i + 1, workload.warmup)

    if warm and not interrupted and all(_never_answered(m) for m in warm):
        raise IdentityError(
            f"the warm-up got no token from {url_without_credentials(target.url)} "
            f"({warm[-1].error}): {_what_it_did(last_warm)} would hold every request of the "
            f"run as long (up to --timeout {limits.total:g} s each), so nothing else was sent. "
            "Is the model loaded, and is this the server you meant?"
        )
    runs: list[RunResult] = []
    prompts_used = len(warm)  # request i of the next run sends prompt prompts_used + i
    for concurrency in () if interrupted else workload.concurrency:
        label = _run_label(workload, concurrency)

        def tick(done: int, total: int | None, label: str = label) -> None:
            if progress:
                progress(label, done, total)

        n = 1
        if processes != 1 and shard is None:
            # Loaded on use: the client processes import this module.
            from felab_core.engine import processes as multi

            n, why = multi.choose(processes, concurrency, workload, warm)
            if why:
                notes.append(f"{label}: {why}")
        before = await _metrics_snapshot(target, notes, model) if check_server else None
        box_before = read_box()
        if n > 1:
            run, interrupted = await multi.run_in_processes(
                target,
                model,
                workload,
                concurrency,
                n,
                limits=limits,
                slo=slo,
                first_prompt=prompts_used,
                progress=tick,
            )
            # The single-process runs of a sweep go on with prompts no process sent yet.
            used = max((m.index for m in run.requests), default=-1) + 1
            next(itertools.islice(prompts, used, used), None)
        else:
            mine = prompts
            if shard is not None:
                check_on_time(shard)
                # Request i of the run sends prompt prompts_used + i, on whichever machine.
                mine = itertools.islice(prompts, shard.index, None, shard.count)
            async with Lanes(limits) as lanes:
                sender = _Sender(lanes, target, model, workload, limits, mine, trace_prompts)
                measured = await measure_run(sender, concurrency, workload, tick, shard)
            interrupted = measured.interrupted
            timelines = measured.timelines
            t_start, t_end = measured.started_ns, measured.ended_ns
            metrics = [request_metrics(t, api_is_ollama=is_ollama) for t in timelines]
            window = steady_window(workload, metrics, timelines, t_start, t_end)
            summary = summarize(
                metrics,
                duration_s=max((t_end - t_start) / 1e9, workload.offered_window_s()),
                slo=slo,
                window_s=None if window is None else window["to_s"] - window["from_s"],
            )
            summary.window = window
            check = client_check(measured.loop_lag_ns, metrics, timelines, workload, concurrency)
            run = RunResult(concurrency, workload.rate, summary, metrics, timelines, check)
            used = max((m.index for m in run.requests), default=-1) + 1
            summary.stopped = measured.stopped
            if measured.stopped:
                notes.append(f"{label}: {measured.stopped}")
            if workload.tools and (prose := _answers_without_a_call(timelines)):
                notes.append(f"{label}: {prose}")
            if buffered := one_read_note(metrics, slo):
                notes.append(f"{label}: {buffered}")
            asked = None if workload.trace else workload.max_tokens  # a trace's lines set theirs
            if asked is not None and (longer := past_length_note(metrics, asked)):
                notes.append(f"{label}: {longer}")
        prompts_used += used
        if own_speed := speed_disagreement_note(run.timelines):
            notes.append(f"{label}: {own_speed}")
        busy = box_note(box_before, read_box())
        if busy is not None:
            run.client.warnings.append(busy)
        after = (
            await _metrics_snapshot(target, [], model)
            if before is not None and not interrupted
            else None
        )
        if before is not None and after is not None:
            fit = None  # a shard's server also counts the other machines' requests
            if shard is None:
                asked = None if workload.trace else workload.max_tokens
                fit = RunFit.of(run.timelines, len(run.requests), run.concurrency, asked)
            run.server_metrics = _server_rates(before, after, run.summary, fit)
        runs.append(run)
        if run.partial:
            notes.append(f"{label}: {run.partial}; these figures are not the whole run")
        if interrupted:
            notes.append(
                f"interrupted: {len(run.requests)} requests finished before Ctrl-C (or SIGTERM); "
                "later runs were not started"
            )
            break
    errors = [m.error for run in runs for m in run.requests]
    if identity and (other := wrong_api_note(target.api, identity.kind, identity.evidence, errors)):
        notes.append(other)
    cold_note = _warmup_cold_note(warm, runs)
    if cold_note:
        notes.append(cold_note)
    filed = model or (identity.models[0] if identity and identity.models else None)
    return TargetResult(  # what the table, the CSV and the record show: no secret in them
        interrupted=interrupted,
        target=target,
        model=None if filed is None else redact(filed),
        identity=identity,
        workload=workload,
        runs=runs,
        warmup=warm,
        started_at=started_at,
        host=redact(this_host()),
        notes=[redact(note) for note in notes],
    )


def _answers_without_a_call(timelines: list[RequestTimeline]) -> str | None:
    """What a --tools run measured instead of tool calls, if it did: a server that ignores
    tool_choice "required" writes prose, and the run had been kept as an agent's turns."""
    answered = [t for t in timelines if t.ok]
    prose = sum(1 for t in answered if not t.tool_call)
    if not prose:
        return None
    return (
        f"{prose:,} of {len(answered):,} answers made no tool call (prose instead), though one "
        "was required: the server ignores tool_choice, so these are not an agent's turns "
        "(is its chat template one that knows tools?)"
    )


def this_host() -> str:
    """The machine's name for the results row; a machine without one (a bare container) is
    'unnamed-host', since a row with an empty host is no row felab imports back."""
    return platform.node().strip() or "unnamed-host"


async def _metrics_snapshot(
    target: Target, notes: list[str], model: str | None = None
) -> Snapshot | None:
    """The server's own counters of the model timed, for the engines that publish them
    (server_kinds.py)."""
    if not target.kind.traits.metrics:
        return None
    try:
        return await asyncio.to_thread(scrape, target.url, kind=target.kind.value, model=model)
    except SizingError as exc:
        note = f"no server-side figures: {exc}"
        if note not in notes:
            notes.append(note)
        return None


#: How much slower than the streams felab timed a server's own per-stream speed may be: tokens
#: reach the client no sooner than they are written, so a tenth of what it saw is no reading.
#: (Faster is possible: on a tiny model the server's own work per token outweighs decoding.)
_SLOWER_THAN_SEEN = 10.0


def _unlike_the_run(rates: ServerRates, summary: RunSummary) -> str | None:
    """Why the server's counters cannot describe the run felab just timed, or None. Streams
    the client saw write 49 tokens a second were "0.0 tokens per second" by the server's
    counters, and a mean first token of 80,000 s came from a window of 0.2 s."""
    seen = summary.writing_tps.p50 if summary.writing_tps else None
    stream = rates.stream_tokens_per_second
    if seen and stream is not None and stream < seen / _SLOWER_THAN_SEEN:
        return (
            f"one stream's speed would be {stream:.3g} tokens a second, where felab timed "
            f"{seen:.3g}"
        )
    if (counted := _fewer_than_received(rates, summary)) is not None:
        return counted
    ttft = rates.mean_ttft_seconds
    if ttft is not None and ttft > rates.seconds + 1.0:
        return (
            f"the mean time to first token would be {ttft:.3g} s, between looks "
            f"{rates.seconds:.3g} s apart"
        )
    return None


#: How far under the tokens felab received a server's own count may fall (chunks counted as
#: tokens where a server sent no usage, a character split over two chunks).
_COUNTED_SHARE = 0.9


def _fewer_than_received(rates: ServerRates, summary: RunSummary) -> str | None:
    """Why the counters cannot be this server's, or None: a server writes every token felab
    received, and reads a prompt for every answer (llama.cpp evaluates one token of a prompt it
    has all cached). Counters that did not move (a stale page, another process's, a proxy's
    cached copy) had been saved as "wrote 0 tokens, 0.0 tok/s" beside 24 tokens received."""
    received = summary.output_tokens
    written = rates.generation_tokens
    if received and written is not None and written < received * _COUNTED_SHARE:
        return (
            f"the server would have written {written:,.0f} tokens, where felab received "
            f"{received:,} from it: a stale or cached /metrics page, or another process's "
            "counters"
        )
    if summary.ok and rates.prompt_tokens == 0:
        return (
            f"the server would have read no prompt tokens, where felab had {summary.ok:,} "
            "prompts answered: a stale or cached /metrics page, or another process's counters"
        )
    return None


def _server_rates(
    before: Snapshot, after: Snapshot, summary: RunSummary, fit: RunFit | None = None
) -> dict[str, Any] | None:
    try:
        rates = diff(before, after)
        unbelievable = rates.past_reason() or _unlike_the_run(rates, summary)
        if unbelievable is None and fit is not None:
            unbelievable = past_the_run(rates, fit, summary.output_tokens)
        explanation = rates.explanation if unbelievable is None else ""
    except SizingError as exc:  # a counter went down (a restart between the looks)
        return {
            "engine": after.engine,
            "seconds": after.taken_at - before.taken_at,
            "explanation": f"the server's /metrics are not used: {exc}",
        }
    except (ArithmeticError, ValueError):  # a server counter past reason
        return None
    if unbelievable is not None:  # 10^27 tokens a second had been printed and saved
        return {
            "engine": rates.engine,
            "seconds": rates.seconds,
            "explanation": f"the server's /metrics do not fit this run ({unbelievable}), so "
            "they are not used",
        }
    return {
        "engine": rates.engine,
        "seconds": rates.seconds,
        "prompt_tokens": rates.prompt_tokens,
        "generation_tokens": rates.generation_tokens,
        "generation_tps": rates.generation_tokens_per_second,
        "stream_tps": rates.stream_tokens_per_second,
        "mean_ttft_s": rates.mean_ttft_seconds,
        "explanation": explanation,
    }


#: The kinds of failure (the text before an error's first colon) of a request the server took
#: and never answered: past --timeout, or silent past --stall-timeout.
_UNANSWERED = ("timeout", "stalled")


def _what_it_did(tl: RequestTimeline | None) -> str:
    """What a server that gave no token did with the request, for the warm-up's message: a
    stream begun and never one whole event (bytes dripped, or keep-alive comments only) is not
    a server that never answered."""
    if tl is None or tl.headers_ns is None:
        return "a server that takes a request and never answers"
    if tl.sse_comments:
        return (
            f"a server that answered (HTTP {tl.status}) and then sent only keep-alive comments "
            f"({tl.sse_comments}), never a token,"
        )
    return (
        f"a server that answered (HTTP {tl.status}) and then never finished one event (a token "
        "arrives as a whole `data:` line; this one may be sending a byte at a time)"
    )


def _never_answered(m: RequestMetrics) -> bool:
    """A request that ran out of time without one token: the server took it, never answered."""
    kind = (m.error or "").split(":", 1)[0]
    return not m.ok and kind in _UNANSWERED and not m.output_tokens and not m.counted_chunks


def _warmup_cold_note(warm: list[RequestMetrics], runs: list[RunResult]) -> str | None:
    """Say when the warm-up paid for a model load, which is why it is not counted."""
    if not warm:
        return None
    first = warm[0]
    if first.server_load_s and loaded_model(first):  # the run's own rule (0.00 s had been one)
        return f"cold start in warm-up: the server loaded the model ({first.server_load_s:.2f} s)"
    typical = next((r.summary.ttft_s.p50 for r in runs if r.summary.ttft_s), None)
    if first.ttft_s and typical and first.ttft_s > 4 * typical and first.ttft_s - typical > 0.25:
        return (
            f"cold start in warm-up: first TTFT {first.ttft_s:.2f} s against a typical "
            f"{typical:.3f} s; not counted"
        )
    return None
