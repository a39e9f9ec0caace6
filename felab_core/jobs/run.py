"""Running one job on the student's machine: the worker's side of a job, free of Celery.

The target's address comes from this machine's targets file (FELAB_TARGETS_FILE), looked up by
the name in the message; the workload is checked against the limits again here, because a
message read off the broker is not trusted to have come through the server.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from felab_core.engine.results import csv_row
from felab_core.engine.runner import TargetResult
from felab_core.engine.service import run_bench, run_sync
from felab_core.engine.targets import Target, TargetError, load_targets
from felab_core.errors import ServiceError
from felab_core.jobs.messages import JobMessage, event
from felab_core.jobs.workload import Limits, job_workload

T = TypeVar("T")
Emit = Callable[[dict[str, Any]], None]  # sends an unsigned event (the caller signs it)


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def chart_png(result: TargetResult) -> bytes:
    """A small chart of each request's writing speed and TTFT, for the chat post."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3), dpi=80)
    for run in result.runs:
        tps = [r.writing_tps for r in run.requests if r.ok and r.writing_tps]
        ax.plot(range(1, len(tps) + 1), tps, marker="o", label=f"c={run.concurrency}")
    ax.set_xlabel("request")
    ax.set_ylabel("writing speed (tokens/s)")
    ax.set_title(f"{result.target.name}: {result.model or ''}"[:60])
    ax.legend(loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def summary_text(result: TargetResult) -> str:
    lines = [f"{result.target.name} ({result.model or 'model unknown'}) on {result.host}"]
    for run in result.runs:
        s = run.summary
        tps = s.writing_tps.p50 if s.writing_tps else None
        ttft = s.ttft_s.p50 if s.ttft_s else None
        lines.append(
            f"c={run.concurrency}: {s.ok} ok, {s.failed} failed; writing speed p50 "
            f"{'-' if tps is None else f'{tps:.1f}'} tokens/s; TTFT p50 "
            f"{'-' if ttft is None else f'{ttft * 1000:.0f}'} ms"
        )
    return "\n".join(lines)


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


async def _within(coro: Coroutine[Any, Any, T], seconds: float | None) -> T:
    """`coro`, cancelled after `seconds`; _OutOfTime then (not a TimeoutError from inside).

    The engine treats a cancel as Ctrl-C: it stops sending and returns what it measured, so the
    deadline is checked after a normal return too.
    """
    if seconds is None:
        return await coro
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            result = await coro
    except TimeoutError:
        if deadline.expired():
            raise _OutOfTime() from None
        raise
    if deadline.expired():
        raise _OutOfTime()
    return result


def execute(
    msg: JobMessage,
    *,
    targets_file: Path | None,
    limits: Limits,
    emit: Emit,
    progress_every_s: float = 0.5,
    time_limit_s: float | None = None,
) -> None:
    """Run the job and report: progress while it runs, then a result or a failure reason.

    `time_limit_s` (the worker's soft limit) stops the measurement from inside the event loop
    and reports why; the pool's hard limit is the backstop for a run stuck outside it. (Celery's
    own soft limit raises from a signal handler, which an asyncio loop swallows.)
    """

    def fail(reason: str) -> None:
        emit(
            event(
                msg.worker_id,
                "failed",
                job_id=msg.job_id,
                attempt=msg.attempt,
                body={"reason": reason},
            )
        )

    try:
        target = find_target(msg.target, targets_file)
        workload = job_workload(msg.preset, dict(msg.params), limits)
    except ServiceError as exc:
        fail(str(exc))
        return
    total = (workload.requests or 0) * len(workload.concurrency)
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
            emit(
                event(
                    msg.worker_id,
                    "progress",
                    job_id=msg.job_id,
                    attempt=msg.attempt,
                    body={"done": done, "total": total},
                )
            )

    try:
        outcomes = run_sync(_within(run_bench([target], workload, progress=tick), time_limit_s))
    except _OutOfTime:
        assert time_limit_s is not None
        fail(time_limit_reason(time_limit_s))
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
    body = {
        "rows": [csv_row(result, run) for run in result.runs],
        "record": json.loads(json.dumps(_clean(result.to_json()))),
        "summary": summary_text(result),
        "png": base64.b64encode(chart_png(result)).decode("ascii"),
    }
    emit(event(msg.worker_id, "result", job_id=msg.job_id, attempt=msg.attempt, body=body))
