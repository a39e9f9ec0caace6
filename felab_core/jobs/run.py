"""Running one job on the student's machine: the worker's side of a job, free of Celery and of
any database.

The target's address comes from this machine's targets file (FELAB_TARGETS_FILE), looked up by
the name in the message; the workload is checked against the limits again here, because a
message read off the broker is not trusted to have come through the server. What the result
carries is decided here too: target names and figures, never the target's URL or this machine's
host name, per-request figures without their chunk times, within FELAB_RESULT_MAX_BYTES.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from felab_core.engine.bench import run_bench
from felab_core.engine.event_loop import run_sync
from felab_core.engine.measure import RunResult, TargetResult
from felab_core.engine.merge import request_to_wire
from felab_core.engine.results import csv_row
from felab_core.engine.shards import Shard
from felab_core.engine.targets import Target, TargetError, load_targets
from felab_core.errors import ServiceError
from felab_core.jobs.clock import SAME_CLOCK, ClockOffset, local_start_ns, measure_offset
from felab_core.jobs.messages import JobMessage, event
from felab_core.jobs.workload import Limits, job_workload, too_large_reason
from felab_core.redact import url_without_credentials

T = TypeVar("T")
Emit = Callable[[dict[str, Any]], None]  # sends an unsigned event (the caller signs it)
Cancelled = Callable[[], bool]

#: The per-request fields a result keeps: enough to check the figures and draw the chart.
REQUEST_FIELDS = (
    "index",
    "turn",
    "cached_tokens",
    "ok",
    "error",
    "ttft_s",
    "tpot_s",
    "writing_tps",
    "e2e_s",
    "output_tokens",
    "token_source",
    "prompt_tokens",
    "first_chunk_tokens",
    "counted_chunks",
    "cold",
    "retries",
)
#: How often a running job looks at its cancel flag.
CANCEL_POLL_S = 0.2


log = logging.getLogger("felab.worker")


def without_address(text: str, target: Target) -> str:
    """`text` with `target`'s address (its URL, host and port) said as the target's name: a
    job's reason and its requests' errors reach the database and chat, and the address stays
    on the machine (a failure had posted an internal host name and port to the cohort)."""
    shown = f"the url of target {target.name!r} (in your targets file)"
    forms = set()
    for url in (target.url, url_without_credentials(target.url)):
        parts = urlsplit(url)
        forms |= {url, url.rstrip("/"), f"{parts.scheme}://{parts.netloc}", parts.netloc}
        bare = parts.netloc.rsplit("@", 1)[-1]
        forms |= {f"{parts.scheme}://{bare}", bare}
    for form in sorted(filter(None, forms), key=len, reverse=True):
        text = text.replace(form, shown)
    return text


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def result_record(result: TargetResult) -> dict[str, Any]:
    """The JSON record a job sends: no URL, no host name, no chunk times."""
    record = result.to_json()
    record["host"] = ""
    record["target"] = {k: v for k, v in record["target"].items() if k != "url"}
    record.pop("warmup", None)
    for run in record["runs"]:
        run["requests"] = [
            {
                k: (without_address(r[k], result.target)[:300] if k == "error" and r.get(k)
                    else r.get(k))
                for k in REQUEST_FIELDS
            }
            for r in run["requests"]
        ]  # fmt: skip
    cleaned: dict[str, Any] = json.loads(json.dumps(_clean(record)))
    return cleaned


def result_rows(result: TargetResult) -> list[dict[str, str]]:
    """The results CSV rows of a job, with the host left for the ingest to fill in (the
    machine's worker name, never its host name)."""
    return [{**csv_row(result, run), "host": "", **_workload_extras(run)} for run in result.runs]


def _workload_extras(run: RunResult) -> dict[str, str]:
    """What a multi-turn or cached run adds to its chat row (not a results-CSV column): the
    prefix cache's share and TTFT p50 turn by turn."""
    s = run.summary
    extras = {}
    if s.cached_share is not None:
        extras["cached_share"] = f"{s.cached_share:.4f}"
    turns = [t["ttft_p50_s"] for t in s.per_turn]
    if turns and all(t is not None for t in turns):
        extras["ttft_p50_by_turn_ms"] = "/".join(f"{t * 1e3:.0f}" for t in turns)
    return extras


def fingerprint(result: TargetResult) -> dict[str, Any]:
    """What a slice reached, without its address: the slices of one run must agree on it."""
    ident = result.identity
    kind = ident.kind.value if ident is not None and ident.kind else result.target.kind.value
    return {
        "kind": kind,
        "version": (ident.version if ident is not None else None) or "",
        "model": result.model or "",
        "models": sorted(ident.models)[:20] if ident is not None else [],
    }


def _slice_report(result: TargetResult, msg: JobMessage, clock: ClockOffset) -> dict[str, Any]:
    """What the merge reads of a slice (how many requests it owed is the server's to know)."""
    run = result.runs[0]
    return {
        "index": msg.shard,
        "count": msg.shards,
        "start_at": msg.start_at,
        "duration_s": run.summary.duration_s,
        "interrupted": result.interrupted,
        "clock": clock.to_dict(),
        "fingerprint": fingerprint(result),
        "warnings": [w[:300] for w in run.client.warnings][:10],
        "requests": [_clean(request_to_wire(m)) for m in run.requests],
    }


def find_target(name: str, targets_file: Path | None) -> Target:
    try:
        targets = load_targets(targets_file)
    except TargetError as exc:
        raise ServiceError(str(exc)) from None
    if name not in targets:
        where = targets_file or "the built-in list (FELAB_TARGETS_FILE is not set)"
        raise ServiceError(
            f"this machine has no target {name!r} in {where}: add [targets.{name}] with its url"
        )
    return targets[name]


def target_names(targets_file: Path | None) -> dict[str, str] | None:
    """What a worker reports of its targets file: {name: kind}, never a URL (URLs stay on the
    machine). None when the file cannot be read: nothing is reported then, and a job's own run
    says what is wrong with the file."""
    try:
        targets = load_targets(targets_file)
    except TargetError:
        return None
    return {name: t.kind.value for name, t in sorted(targets.items())}


def time_limit_reason(seconds: float) -> str:
    return (
        f"the job ran past its time limit ({seconds:g} s) and was stopped: ask for fewer "
        "requests or tokens"
    )


class _OutOfTime(Exception):
    pass


class _Cancelled(Exception):
    pass


async def _within(
    coro: Coroutine[Any, Any, T], seconds: float | None, cancelled: Cancelled | None
) -> T:
    """`coro`, stopped after `seconds` (_OutOfTime) or when `cancelled()` turns true
    (_Cancelled), whichever comes first.

    The engine treats a cancel as Ctrl-C: it stops sending and returns what it measured, so
    both are checked after a normal return too.
    """
    task = asyncio.ensure_future(coro)
    deadline = None if seconds is None else time.monotonic() + seconds
    why: type[Exception] | None = None
    while not task.done():
        wait = CANCEL_POLL_S if cancelled is not None else None
        if deadline is not None:
            left = deadline - time.monotonic()
            wait = left if wait is None else min(wait, left)
        await asyncio.wait({task}, timeout=None if wait is None else max(wait, 0))
        if task.done():
            break
        if deadline is not None and time.monotonic() >= deadline:
            why = _OutOfTime
        elif cancelled is not None and cancelled():
            why = _Cancelled
        if why is not None:
            task.cancel()
            await asyncio.wait({task})
            break
    if why is not None:
        raise why()
    return task.result()


def execute(
    msg: JobMessage,
    *,
    targets_file: Path | None,
    limits: Limits,
    emit: Emit,
    progress_every_s: float = 0.5,
    time_limit_s: float | None = None,
    cancelled: Cancelled | None = None,
    max_result_bytes: int = 1_000_000,
    broker_clock: Callable[[], float] | None = None,
) -> None:
    """Run the job and report: progress while it runs, then a result or a failure reason.

    `time_limit_s` (the worker's soft limit) stops the measurement from inside the event loop
    and reports why; the pool's hard limit is the backstop for a run stuck outside it. (Celery's
    own soft limit raises from a signal handler, which an asyncio loop swallows.) `cancelled`
    is polled while the run goes on: once it says so, the run stops and a `stopped` event says
    when. A slice of a spread run reads `broker_clock` (seconds on the broker's clock; None
    when this machine's clock is the broker's) to start with the others.
    """

    def send(kind: str, body: dict[str, Any]) -> None:
        emit(event(msg.worker_id, kind, job_id=msg.job_id, attempt=msg.attempt, body=body))

    target: Target | None = None

    def fail(reason: str) -> None:
        if target is not None:
            said = without_address(reason, target)
            if said != reason:  # the address is the machine's own: its log keeps it
                log.warning("job %s failed: %s", msg.job_id, reason)
            reason = said
        send("failed", {"reason": reason})

    try:
        target = find_target(msg.target, targets_file)
        workload = job_workload(msg.preset, dict(msg.params), limits)
    except ServiceError as exc:
        fail(str(exc))
        return
    shard, clock = None, SAME_CLOCK
    if msg.spread:
        clock = measure_offset(broker_clock) if broker_clock is not None else SAME_CLOCK
        shard = Shard(msg.shard, msg.shards, local_start_ns(msg.start_at, clock))
    # A slice counts the requests it sends, not the whole run's.
    each = workload.requests if shard is None else shard.requests(workload.requests)
    total = (each or 0) * len(workload.concurrency)
    done = 0
    last = 0.0

    def tick(_t: Target, label: str, n: int, _of: int | None) -> None:
        nonlocal done, last
        if label == "warm-up":
            return
        done += 1
        now = time.monotonic()
        if now - last >= progress_every_s or done == total:
            last = now
            send("progress", {"done": done, "total": total})

    bench = run_bench([target], workload, progress=tick, shard=shard)
    try:
        outcomes = run_sync(_within(bench, time_limit_s, cancelled))
    except _OutOfTime:
        assert time_limit_s is not None
        fail(time_limit_reason(time_limit_s))
        return
    except _Cancelled:
        send("stopped", {"reason": "cancelled", "done": done})
        return
    outcome = outcomes[0]
    if outcome.error is not None or outcome.result is None:
        fail(outcome.error or "the target could not be timed")
        return
    result = outcome.result
    ok = sum(r.summary.ok for r in result.runs)
    if ok == 0:
        errors = [r.error for run in result.runs for r in run.requests if r.error]
        fail(f"every request failed: {errors[0] if errors else 'no reason given'}")
        return
    body: dict[str, Any] = {"rows": result_rows(result), "record": result_record(result)}
    if shard is not None:
        body["shard"] = _slice_report(result, msg, clock)
        for run in body["record"]["runs"]:
            run["requests"] = []  # the slice's own list below is the one the merge reads
    size = len(json.dumps(body))
    if size > max_result_bytes:
        fail(too_large_reason(size, max_result_bytes))
        return
    send("result", body)
