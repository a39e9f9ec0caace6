"""One run spread over several client processes, for loads one Python process cannot read.

One process ingests about 20,000 chunks/s before its own lag shows in TTFT and ITL; a GPU server
with hundreds of streams sends more. Each process here has its own event loop and its own
self-check and sends one slice of the run's one schedule (shards.py), all from a start time they
share on CLOCK_MONOTONIC, which every process on a machine reads alike. Their raw per-request
records are merged (merge.py), so the figures are those of the whole run, and a process that dies
makes the run `partial`, never a smaller sample.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from felab_core.engine.client import ClientLimits, Lanes, now_ns
from felab_core.engine.measure import (
    ClientCheck,
    Measured,
    Progress,
    RunResult,
    _Sender,
    client_check,
    measure_run,
)
from felab_core.engine.merge import ShardRecords, merge_shards
from felab_core.engine.metrics import SLO, RequestMetrics, request_metrics
from felab_core.engine.shards import Shard, auto_processes, slices, usable_processes
from felab_core.engine.targets import Target
from felab_core.engine.workloads import Workload
from felab_core.redact import add_if_secret, add_url_secrets

READY_TIMEOUT_S = 120.0  # a spawned process imports httpx and numpy: seconds on a busy laptop
START_LEAD_NS = 100_000_000  # from the start signal to the first send, so every slice is on time


def free_cores() -> int:
    """Cores this process may use, less what the machine is already busy with."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, round((cores or 1) - busy))


def expected_chunks_per_s(
    warm: Sequence[RequestMetrics], concurrency: int, rate: float | None
) -> float | None:
    """The chunk rate a run will bring, from how fast the warm-up's one stream wrote."""
    itls = sorted(x for m in warm for x in m.itl_s if x > 0)
    if not itls:
        return None
    per_stream = 1.0 / itls[len(itls) // 2]
    if rate is None:
        return concurrency * per_stream
    chunks = [m.counted_chunks for m in warm if m.counted_chunks]
    if not chunks:
        return None
    offered = rate * sum(chunks) / len(chunks)
    return offered if concurrency <= 0 else min(offered, concurrency * per_stream)


def _one_process_only(workload: Workload) -> str | None:
    """Runs whose figures depend on the whole run at once stay in one process for now."""
    if workload.sessions is not None:
        return "conversations (--sessions) run in one process"
    if workload.trace is not None:
        return "a trace replay runs in one process"
    if workload.ramp_up_s or workload.ramp_down_s:
        return "a steady-state window (ramp up/down) is measured in one process"
    if workload.stop_when_saturated:
        return "stopping at saturation needs the whole run's view: one process"
    return None


def choose(
    asked: int | None, concurrency: int, workload: Workload, warm: Sequence[RequestMetrics]
) -> tuple[int, str | None]:
    """Processes for one run and, when worth saying, why (auto, or fewer than asked)."""
    unsupported = _one_process_only(workload)
    if unsupported:
        return 1, None if asked is None else f"processes: 1, not {asked}: {unsupported}"
    open_loop = workload.rate is not None
    if asked is None:
        estimate = expected_chunks_per_s(warm, concurrency, workload.rate)
        n, why = auto_processes(estimate, free_cores())
        usable = usable_processes(n, concurrency, workload.requests, open_loop)
        if usable < n:
            n, why = usable, f"{why}; {usable} used, one per user or request"
        # Auto choosing one process is what every run did before: only a choice is news.
        return n, why if n > 1 or "free" in why else None
    n = usable_processes(asked, concurrency, workload.requests, open_loop)
    if n < asked:
        return n, f"processes: {n}, not {asked}: no more processes than users or requests"
    return n, None


@dataclass(frozen=True, slots=True)
class _Order:
    """What one client process is to send (picklable: it crosses to a spawned process)."""

    target: Target
    model: str | None
    workload: Workload
    limits: ClientLimits
    concurrency: int
    shard: Shard
    first_prompt: int


@dataclass(slots=True)
class _Reply:
    measured: Measured
    requests: list[RequestMetrics]
    check: ClientCheck


def _child(conn: Connection, order: _Order) -> None:
    """A client process: wait for the shared start, send its slice, send back the records."""
    from felab_core.engine.event_loop import run_sync  # uvloop where installed, as one process

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    add_url_secrets(order.target.url)  # masked here too: a process starts with none known
    add_if_secret(order.target.model)  # a key pasted as --model, as the parent masks it
    try:
        reply = run_sync(_child_run(conn, order))
        conn.send(("done", reply))
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


async def _child_run(conn: Connection, order: _Order) -> _Reply | None:
    shard = order.shard
    # Request i of the run sends prompt first_prompt + i, as one process would have.
    prompts = itertools.islice(
        order.workload.prompt_plan().prompts(), order.first_prompt + shard.index, None, shard.count
    )
    async with Lanes(order.limits) as lanes:
        sender = _Sender(lanes, order.target, order.model, order.workload, order.limits, prompts)
        conn.send(("ready", None))
        message = conn.recv()  # blocks the loop, which has nothing else to do yet
        if message[0] != "start":
            return None
        shard = replace(shard, start_ns=message[1])
        measured = await measure_run(sender, order.concurrency, order.workload, None, shard)
    is_ollama = order.target.api.value == "ollama"
    requests = [request_metrics(t, api_is_ollama=is_ollama) for t in measured.timelines]
    check = client_check(
        measured.loop_lag_ns, requests, measured.timelines, order.workload, order.concurrency
    )
    return _Reply(measured, requests, check)


def _exit_reason(proc: BaseProcess) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        extra = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"the process was killed by {name}{extra} before it sent its records"
    return f"the process exited (code {code}) before it sent its records"


def _exchange(
    children: list[tuple[Shard, BaseProcess, Connection]],
) -> tuple[dict[int, _Reply], dict[int, str]]:
    """Blocking: wait until every process is ready, give them one start, collect the records."""
    replies: dict[int, _Reply] = {}
    lost: dict[int, str] = {}
    conns = {conn: (shard, proc) for shard, proc, conn in children}
    waiting = set(conns)
    deadline = now_ns() + int(READY_TIMEOUT_S * 1e9)
    while waiting and now_ns() < deadline:
        sentinels = {proc.sentinel: conn for conn, (_, proc) in conns.items() if conn in waiting}
        ready = wait([*waiting, *sentinels], timeout=(deadline - now_ns()) / 1e9)
        for item in ready:
            conn = item if isinstance(item, Connection) else sentinels[item]  # type: ignore[index]
            if conn not in waiting:
                continue
            shard, proc = conns[conn]
            try:
                kind, body = conn.recv()
            except (EOFError, OSError):
                proc.join(5)
                kind, body = "error", _exit_reason(proc)
            waiting.discard(conn)
            if kind != "ready":
                lost[shard.index] = str(body) or _exit_reason(proc)
    for conn in waiting:
        lost[conns[conn][0].index] = f"not ready within {READY_TIMEOUT_S:.0f} s"
    start = now_ns() + START_LEAD_NS
    running = {c for c in conns if conns[c][0].index not in lost}
    for conn in running:
        conn.send(("start", start))
    for conn in set(conns) - running:
        conns[conn][1].kill()
    while running:
        sentinels = {proc.sentinel: conn for conn, (_, proc) in conns.items() if conn in running}
        for item in wait([*running, *sentinels]):
            conn = item if isinstance(item, Connection) else sentinels[item]  # type: ignore[index]
            if conn not in running:
                continue
            shard, proc = conns[conn]
            running.discard(conn)
            try:
                kind, body = conn.recv()
            except (EOFError, OSError):
                proc.join(5)
                lost[shard.index] = _exit_reason(proc)
                continue
            if kind == "done" and isinstance(body, _Reply):
                replies[shard.index] = body
            else:
                lost[shard.index] = f"the process failed: {body}"
    return replies, lost


def _merged_check(replies: dict[int, _Reply], run: RunResult, n: int) -> list[ClientCheck]:
    """Figures over every process's samples; warnings from each process's own self-check."""
    lag = [x for r in replies.values() for x in r.measured.loop_lag_ns]
    run.client = client_check(lag, run.requests, run.timelines)
    run.client.warnings = [
        f"process {i + 1} of {n}: {w}" for i, r in sorted(replies.items()) for w in r.check.warnings
    ]
    return [r.check for _, r in sorted(replies.items())]


async def run_in_processes(
    target: Target,
    model: str | None,
    workload: Workload,
    concurrency: int,
    n: int,
    *,
    limits: ClientLimits,
    slo: SLO | None,
    first_prompt: int,
    progress: Progress | None = None,
) -> tuple[RunResult, bool]:
    """One run over `n` client processes; the result and whether Ctrl-C stopped it."""
    ctx = multiprocessing.get_context("spawn")  # no inherited event loop, sockets or threads
    children: list[tuple[Shard, BaseProcess, Connection]] = []
    for shard in slices(n):
        mine, theirs = ctx.Pipe()
        order = _Order(target, model, workload, limits, concurrency, shard, first_prompt)
        proc: BaseProcess = ctx.Process(
            target=_child, args=(theirs, order), name=f"felab-bench-{shard.index + 1}", daemon=True
        )
        proc.start()
        theirs.close()
        children.append((shard, proc, mine))
    interrupted = False
    exchange = asyncio.ensure_future(asyncio.to_thread(_exchange, children))
    try:
        replies, lost = await asyncio.shield(exchange)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        interrupted = True
        for _, proc, _ in children:
            proc.terminate()
        replies, lost = await exchange
        lost = {i: "stopped by Ctrl-C" for i in range(n) if i not in replies} | lost
    finally:
        for _, proc, conn in children:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
            conn.close()
    expected = None if workload.duration_s is not None else workload.requests
    records = [
        ShardRecords(
            shard=i,
            requests=r.requests,
            started_ns=r.measured.started_ns,
            ended_ns=r.measured.ended_ns,
            expected=slices(n)[i].requests(expected),
            interrupted=r.measured.interrupted,
        )
        for i, r in replies.items()
    ]
    merged = merge_shards(
        records, shards=n, lost=lost, slo=slo, offered_s=workload.offered_window_s()
    )
    timelines = sorted(
        (t for r in replies.values() for t in r.measured.timelines), key=lambda t: t.index
    )
    run = RunResult(
        concurrency,
        workload.rate,
        merged.summary,
        merged.requests,
        timelines,
        ClientCheck(),
        partial=merged.partial_reason,
    )
    run.processes = _merged_check(replies, run, n)
    if progress:
        progress(len(run.requests), workload.requests)
    return run, interrupted
