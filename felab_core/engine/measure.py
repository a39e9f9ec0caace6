"""One run measured: the sender, the closed, open-loop, trace and session loops over it, the
client's self-check (event-loop lag, lateness against the schedule, the machine's own load),
the saturation stop, and the records a run yields (RunResult, TargetResult).

Closed loop: C users, each sending its next request when the last one ends. Open loop: sends on
an absolute schedule (so a late send never delays the next), with concurrency as an optional cap
on requests in flight. The client watches itself and says so when it, not the server, may have
limited the result. One process runs it (runner.py) or several, each a slice of one schedule
(processes.py): both import it, neither imports the other back.

Long because one run's whole life is here: the closed, open-loop, trace and session loops over
one sender, the self-check and the saturation stop; metrics, framing, workloads and analysis are
their own modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import numpy as np

from felab_core import __version__
from felab_core.engine.apis import Api, GenerationRequest, adapter_for
from felab_core.engine.client import ClientLimits, Lanes, now_ns, stream_request
from felab_core.engine.loads import run_load
from felab_core.engine.metrics import (
    RequestMetrics,
    RunSummary,
)
from felab_core.engine.probe import ServerIdentity
from felab_core.engine.shards import Shard
from felab_core.engine.targets import Target, force_length_extra, per_chunk_usage_extra
from felab_core.engine.timeline import RequestTimeline
from felab_core.engine.trace import TracePrompts
from felab_core.engine.workloads import (
    MAX_TOKENS,
    WEATHER_TOOL,
    Workload,
    arrival_offsets_s,
    turn_message,
)
from felab_core.redact import url_without_credentials
from felab_core.text import counted

SCHEMA = "felab.bench/1"
#: The most characters a conversation's history may reach: about four a token of the longest
#: context any model has. Past it no server takes the next turn, and a server sending pages for
#: each answer had grown every session's history (and memory) without bound: 4 GB in 50 s.
MOST_HISTORY_CHARS = 4 * MAX_TOKENS
LOOP_PROBE_INTERVAL_S = 0.01
LOOP_LAG_WARN_MS = 5.0
SCHEDULE_LAG_WARN_MS = 10.0

Progress = Callable[[int, int | None], None]


@dataclass(slots=True)
class ClientCheck:
    """How busy the client itself was: the evidence for trusting (or not) a run's figures."""

    loop_lag_p50_ms: float | None = None
    loop_lag_p99_ms: float | None = None
    loop_lag_max_ms: float | None = None
    # Kernel arrival to felab reading the bytes: kept out of the figures by kernel stamps.
    read_lag_p50_ms: float | None = None
    read_lag_p99_ms: float | None = None
    kernel_stamps: bool = False
    schedule_lag_p50_ms: float | None = None
    schedule_lag_p99_ms: float | None = None
    queue_wait_p50_ms: float | None = None
    queued_requests: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(slots=True)
class RunResult:
    concurrency: int
    rate: float | None
    summary: RunSummary
    requests: list[RequestMetrics]
    timelines: list[RequestTimeline]
    client: ClientCheck
    server_metrics: dict[str, Any] | None = None  # the server's /metrics, after minus before
    # With several client processes: each one's own self-check, and why the run is partial
    # (a process lost) when it is.
    processes: list[ClientCheck] = field(default_factory=list)
    partial: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "concurrency": self.concurrency,
            "rate": self.rate,
            "summary": self.summary.to_json(),
            "client": self.client.to_json(),
            "server_metrics": self.server_metrics,
            "requests": [m.to_json() for m in self.requests],
        }
        if self.processes or self.partial:
            out["processes"] = [c.to_json() for c in self.processes]
            out["partial"] = self.partial
        return out


@dataclass(slots=True)
class TargetResult:
    target: Target
    model: str | None
    identity: ServerIdentity | None
    workload: Workload
    runs: list[RunResult]
    warmup: list[RequestMetrics]
    started_at: str
    host: str
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False  # Ctrl-C: the runs hold what finished before it

    @property
    def failed(self) -> int:
        return sum(r.summary.failed for r in self.runs)

    @property
    def partial(self) -> bool:
        """A client process was lost: what is left is a smaller sample, not the run."""
        return any(r.partial for r in self.runs)

    def to_json(self) -> dict[str, Any]:
        w = self.workload
        return {
            "schema": SCHEMA,
            "felab_version": __version__,
            "host": self.host,
            "started_at": self.started_at,
            "target": {
                "name": self.target.name,
                "url": url_without_credentials(self.target.url),
                "api": self.target.api.value,
                "model": self.model,
                "kind": self.target.kind.value,
            },
            "server": None
            if self.identity is None
            else {
                "kind": self.identity.kind.value if self.identity.kind else None,
                "version": self.identity.version,
                "evidence": self.identity.evidence,
            },
            "workload": w.to_record(),
            "notes": self.notes,
            "interrupted": self.interrupted,
            "warmup": [m.to_json() for m in self.warmup],
            "runs": [r.to_json() for r in self.runs],
        }


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while timing: a full collection over a run's timelines
    stalls the event loop for tens of milliseconds, and every chunk read meanwhile is late.
    Reference counting still frees almost everything; the cycles are collected afterwards."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _stop_cancelling() -> None:
    """Take back the cancellation Ctrl-C delivered, so the partial result can be returned."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def _stamp(fut: asyncio.Future[int]) -> None:
    if not fut.done():
        fut.set_result(now_ns())


class _LoopLagProbe:
    """Measures how long a callback waits in the event loop's ready queue.

    That wait is what delays stamping a chunk that has already arrived, so it bounds the
    client's own contribution to TTFT and ITL, whatever the loop's timer resolution.
    """

    def __init__(self) -> None:
        self.samples_ns: list[int] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            queued = now_ns()
            fut: asyncio.Future[int] = loop.create_future()
            loop.call_soon(_stamp, fut)
            ran = await fut
            self.samples_ns.append(ran - queued)
            await asyncio.sleep(LOOP_PROBE_INTERVAL_S)

    def __enter__(self) -> _LoopLagProbe:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task:
            self._task.cancel()


def _ms_percentiles(values_s: list[float], qs: tuple[int, ...]) -> list[float | None]:
    if not values_s:
        return [None for _ in qs]
    return [float(x) * 1e3 for x in np.percentile(np.asarray(values_s), qs)]


def client_check(
    loop_lag_ns: list[int],
    metrics: list[RequestMetrics],
    timelines: list[RequestTimeline],
    workload: Workload | None = None,
    cap: int | None = None,
) -> ClientCheck:
    """The client's own timing, and what kept requests from their send times, in the words of
    what the run had (`workload`, `cap`: its concurrency): a trace replay had been told of a
    --rate and a --concurrency cap it never had (eighteenth sweep, a2 L11)."""
    check = ClientCheck()
    read_lag = [x / 1e9 for t in timelines for x in t.stamp_lag_ns]
    check.read_lag_p50_ms, check.read_lag_p99_ms = _ms_percentiles(read_lag, (50, 99))
    check.kernel_stamps = any(x > 0 for t in timelines for x in t.stamp_lag_ns)
    lag_s = [x / 1e9 for x in loop_lag_ns]
    if lag_s:
        check.loop_lag_p50_ms, check.loop_lag_p99_ms = _ms_percentiles(lag_s, (50, 99))
        check.loop_lag_max_ms = max(lag_s) * 1e3
    sched = [m.dispatch_lag_s for m in metrics if m.dispatch_lag_s is not None]
    check.schedule_lag_p50_ms, check.schedule_lag_p99_ms = _ms_percentiles(sched, (50, 99))
    waits = [m.queue_wait_s for m in metrics if m.queue_wait_s is not None]
    check.queue_wait_p50_ms = _ms_percentiles(waits, (50,))[0]
    check.queued_requests = sum(1 for w in waits if w > 0.001)
    if check.loop_lag_p99_ms is not None and check.loop_lag_p99_ms > LOOP_LAG_WARN_MS:
        if check.kernel_stamps:
            check.warnings.append(
                f"the client's event loop was busy (p99 lag {check.loop_lag_p99_ms:.1f} ms): "
                "arrivals carry the kernel's stamps, but sends may have left late"
            )
        else:
            check.warnings.append(
                f"the client's event loop was busy (p99 lag {check.loop_lag_p99_ms:.1f} ms): "
                "TTFT and ITL include client delay; run fewer streams per process"
            )
    if check.schedule_lag_p99_ms is not None and check.schedule_lag_p99_ms > SCHEDULE_LAG_WARN_MS:
        paced = (
            "its schedule"
            if workload is None
            else "the trace's times"
            if workload.trace is not None
            else "--rate"
        )
        check.warnings.append(
            f"requests left late (p99 {check.schedule_lag_p99_ms:.1f} ms behind schedule): the "
            f"client could not keep up with {paced}, so the offered load was lower than asked"
        )
    if check.queued_requests:
        waited = (
            "for a free slot under the --concurrency cap"
            if cap is None or cap > 0
            else "to leave after their send time (no --concurrency cap: the client was busy "
            "starting requests)"
        )
        check.warnings.append(
            f"{counted(check.queued_requests, 'request')} waited {waited}; latency from the "
            "schedule includes that wait"
        )
    return check


def generation_request(
    workload: Workload,
    target: Target,
    model: str | None,
    prompt: str,
    max_tokens: int | None = None,
) -> GenerationRequest:
    """One request's body; `max_tokens` overrides the workload's (a trace's own lengths)."""
    length = max_tokens if max_tokens is not None else workload.max_tokens
    extra: dict[str, Any] = dict(per_chunk_usage_extra(target))
    if length is not None:
        extra.update(force_length_extra(target.kind))
    if workload.tools:
        extra["tools"] = [WEATHER_TOOL]
        if target.api is not Api.OLLAMA:  # Ollama has no tool_choice; it calls when it can
            extra["tool_choice"] = "required"
    return GenerationRequest(
        prompt=prompt,
        max_tokens=length,
        model=model,
        temperature=workload.temperature,
        seed=workload.seed,
        extra=extra,
    )


@dataclass(slots=True)
class _Sender:
    lanes: Lanes
    target: Target
    model: str | None
    workload: Workload
    limits: ClientLimits
    prompts: Iterator[str]
    trace: TracePrompts | None = None

    async def send(
        self,
        tl: RequestTimeline,
        client: httpx.AsyncClient,
        *,
        prompt: str | None = None,
        history: tuple[tuple[str, str], ...] = (),
    ) -> RequestTimeline:
        """Send one request: `prompt` and `history` are a session's turn, else the workload's."""
        adapter = adapter_for(self.target.api)
        if prompt is not None:
            req = replace(
                generation_request(self.workload, self.target, self.model, prompt),
                history=history,
            )
        elif self.trace is not None and tl.index >= 0:  # warm-up keeps the ordinary prompts
            req = generation_request(
                self.workload,
                self.target,
                self.model,
                self.trace.prompt(tl.index),
                self.trace.max_tokens(tl.index),
            )
        else:
            req = generation_request(self.workload, self.target, self.model, next(self.prompts))
        url = self.target.url + adapter.path
        payload = adapter.payload(req)
        return await stream_request(client, url, adapter, payload, tl, self.limits)


async def _closed_loop(
    sender: _Sender,
    concurrency: int,
    workload: Workload,
    progress: Progress | None,
    done: list[RequestTimeline],
    shard: Shard | None = None,
) -> None:
    """Fill `done` as requests finish, so an interrupted run still has what it measured.

    A slice of a run takes its share of the users and requests, from the shared start."""
    shard = shard or Shard()
    total = shard.requests(workload.requests)
    if shard.start_ns is not None:
        await asyncio.sleep(max(0, shard.start_ns - now_ns()) / 1e9)
    deadline = None if workload.duration_s is None else now_ns() + int(workload.duration_s * 1e9)
    issued = 0

    async def user() -> None:
        nonlocal issued
        client = sender.lanes.acquire()  # each user keeps its own connection
        while (total is None or issued < total) and (deadline is None or now_ns() < deadline):
            tl = RequestTimeline(index=shard.global_index(issued))
            issued += 1
            tl.started_ns = tl.dispatched_ns = now_ns()
            done.append(await sender.send(tl, client))
            if progress:
                progress(len(done), total)

    await asyncio.gather(*(user() for _ in range(shard.share(concurrency))))


async def _sessions_loop(
    sender: _Sender,
    concurrency: int,
    workload: Workload,
    progress: Progress | None,
    done: list[RequestTimeline],
) -> str | None:
    """Multi-turn conversations: each sends its turns one after another, the history growing
    with every user message and answer, a think time between; `concurrency` run at once.
    Returns why conversations ended before their last turn, if any did."""
    assert workload.sessions is not None
    waiting = list(range(workload.sessions))
    total = workload.sessions * workload.turns
    issued = 0

    outgrown: list[str] = []
    written = {"user": 0, "assistant": 0}  # characters each side put into the histories

    async def conversation(session: int, client: httpx.AsyncClient) -> None:
        nonlocal issued
        history: tuple[tuple[str, str], ...] = ()
        size = 0
        for turn in range(1, workload.turns + 1):
            if size > MOST_HISTORY_CHARS:
                outgrown.append(f"conversation {session + 1} after turn {turn - 1}")
                return
            message = turn_message(workload.seed, session, turn, workload.prompt_tokens)
            tl = RequestTimeline(index=issued, turn=turn)
            issued += 1
            tl.started_ns = tl.dispatched_ns = now_ns()
            done.append(await sender.send(tl, client, prompt=message, history=history))
            if progress:
                progress(len(done), total)
            if not tl.ok:
                return  # a conversation cannot go on without its answer
            answer = "".join(c.text for c in tl.content_chunks())
            # a broken server's "\ud800" cannot be sent back as UTF-8: it goes back as '?'
            answer = answer.encode("utf-8", "replace").decode("utf-8")
            history = (*history, ("user", message), ("assistant", answer))
            size += len(message) + len(answer)
            written["user"] += len(message)
            written["assistant"] += len(answer)
            if workload.think_time_s and turn < workload.turns:
                await asyncio.sleep(workload.think_time_s)

    async def user() -> None:
        client = sender.lanes.acquire()  # a user keeps its connection across its sessions
        while waiting:
            await conversation(waiting.pop(0), client)

    await asyncio.gather(*(user() for _ in range(max(1, concurrency))))
    if not outgrown:
        return None
    cause = (  # whichever side filled the histories: a 200,000-token prompt, or pages a turn
        "the user's messages are long (lower --prompt-tokens or --turns)"
        if written["user"] >= written["assistant"]
        else "the server's answers are long for their turns (check --max-tokens and the server)"
    )
    return (
        f"{len(outgrown):,} conversation(s) ended early ({outgrown[0]} the first): the history "
        f"passed {MOST_HISTORY_CHARS:,} characters, more than any model's context holds; {cause}"
    )


@dataclass(slots=True)
class SaturationGuard:
    """Says when an open-loop run has over-saturated the server: over the last `window_s`,
    fewer than half the requests sent have finished and the number in flight has at least
    doubled. Past that point every new request only lengthens a queue, and the figures describe
    the queue, not the server."""

    window_s: float = 3.0
    min_sent: int = 10
    _samples: list[tuple[int, int, int]] = field(default_factory=list)  # (t_ns, sent, finished)

    def check(self, t_ns: int, sent: int, finished: int) -> str | None:
        self._samples.append((t_ns, sent, finished))
        horizon = t_ns - int(self.window_s * 1e9)
        while len(self._samples) > 1 and self._samples[1][0] <= horizon:
            self._samples.pop(0)
        t0, sent0, finished0 = self._samples[0]
        if t0 > horizon:  # not a whole window of history yet
            return None
        sent_d, finished_d = sent - sent0, finished - finished0
        in_flight0, in_flight = sent0 - finished0, sent - finished
        if (
            sent_d >= self.min_sent
            and finished_d < 0.5 * sent_d
            and in_flight >= 2 * max(1, in_flight0)
        ):
            return (
                f"stopped sending: the server is over-saturated (in the last {self.window_s:g} s "
                f"{finished_d} of {sent_d} requests sent finished; {in_flight} in flight, "
                f"{in_flight0} before); the requests already sent were measured"
            )
        return None


async def _open_loop(
    sender: _Sender,
    cap: int,
    workload: Workload,
    progress: Progress | None,
    done: list[RequestTimeline],
    shard: Shard | None = None,
) -> str | None:
    """Send on the schedule; returns why sending stopped early, if it did.

    A slice of a run sends only its own requests, at their times from the shared start."""
    shard = shard or Shard()
    total = workload.requests
    offsets: Iterable[float]
    if workload.trace is not None:
        times = workload.trace.offsets_s(total)
        if workload.duration_s is not None:
            times = [t for t in times if t < workload.duration_s]
        offsets, total = times, len(times)
    else:
        assert workload.rate is not None
        offsets = arrival_offsets_s(
            workload.rate,
            workload.burstiness,
            workload.seed,
            count=total,
            duration_s=workload.duration_s,
        )
    total = shard.requests(total)
    cap = shard.share(cap)
    limit = asyncio.Semaphore(cap) if cap > 0 else None

    async def send(tl: RequestTimeline) -> None:
        tl.dispatched_ns = now_ns()
        client = sender.lanes.acquire()
        try:
            await sender.send(tl, client)
        finally:
            sender.lanes.release(client)

    async def one(tl: RequestTimeline) -> None:
        tl.started_ns = now_ns()
        if limit is None:
            await send(tl)
        else:
            async with limit:
                await send(tl)
        done.append(tl)
        if progress:
            progress(len(done), total)

    # A short lead so the first send is on time too.
    t0 = now_ns() + 20_000_000 if shard.start_ns is None else shard.start_ns
    tasks: list[asyncio.Task[None]] = []
    guard = SaturationGuard() if workload.stop_when_saturated else None
    stopped: str | None = None
    try:
        for i, offset in enumerate(offsets):
            if not shard.owns(i):
                continue
            scheduled = t0 + int(offset * 1e9)
            delay = (scheduled - now_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            if guard is not None:
                stopped = guard.check(now_ns(), len(tasks), len(done))
                if stopped:
                    break
            tl = RequestTimeline(index=i, scheduled_ns=scheduled)
            tasks.append(asyncio.create_task(one(tl)))
        await asyncio.gather(*tasks)
        return stopped
    finally:
        # Interrupted: the requests already sent must not outlive the run.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def steady_window(
    workload: Workload,
    metrics: list[RequestMetrics],
    timelines: list[RequestTimeline],
    t_start: int,
    t_end: int,
) -> dict[str, Any] | None:
    """Mark requests outside the steady state: sent in the first `ramp_up_s` of the run, or
    still running in its last `ramp_down_s`. They are counted as sent, not in the figures."""
    if not workload.ramp_up_s and not workload.ramp_down_s:
        return None
    lo = t_start + int(workload.ramp_up_s * 1e9)
    hi = t_end - int(workload.ramp_down_s * 1e9)
    for m, tl in zip(metrics, timelines, strict=True):
        sent = tl.sent_ns or tl.started_ns or t_start
        ended = tl.end_ns or t_end
        m.outside_window = sent < lo or ended > hi
    kept = sum(1 for m in metrics if not m.outside_window)
    return {
        "from_s": workload.ramp_up_s,
        "to_s": max(workload.ramp_up_s, (hi - t_start) / 1e9),
        "kept": kept,
        "dropped": len(metrics) - kept,
    }


def _run_label(workload: Workload, concurrency: int) -> str:
    """What the progress bar and the run's notes call a run (its load, as everywhere)."""
    if workload.sessions is not None:
        return f"{workload.sessions} sessions x {workload.turns} turns, c={concurrency}"
    return run_load(workload, concurrency)


@dataclass(slots=True)
class Measured:
    """One run (or one slice of it) as measured, before any figure is computed."""

    timelines: list[RequestTimeline]
    loop_lag_ns: list[int]
    started_ns: int
    ended_ns: int
    interrupted: bool
    stopped: str | None = None  # why an open loop stopped sending early


async def measure_run(
    sender: _Sender,
    concurrency: int,
    workload: Workload,
    progress: Progress | None = None,
    shard: Shard | None = None,
) -> Measured:
    """Send one run's requests (or one slice's) while the client watches its own lag."""
    shard = shard or Shard()
    done: list[RequestTimeline] = []
    stopped: str | None = None
    interrupted = False
    with _LoopLagProbe() as probe, _collector_paused():
        t_start = now_ns() if shard.start_ns is None else shard.start_ns
        try:
            if workload.sessions is not None:
                stopped = await _sessions_loop(sender, concurrency, workload, progress, done)
            elif not workload.open_loop:
                await _closed_loop(sender, concurrency, workload, progress, done, shard)
            else:
                stopped = await _open_loop(sender, concurrency, workload, progress, done, shard)
        except asyncio.CancelledError:
            # Ctrl-C: keep what was measured, run nothing more.
            _stop_cancelling()
            interrupted = True
        timelines = sorted(done, key=lambda t: t.index)
        t_end = max((t.end_ns or t_start for t in timelines), default=now_ns())
    return Measured(timelines, probe.samples_ns, t_start, t_end, interrupted, stopped)
